// Worker frames: how a worker's messages reach the harness. The worker runs the library under
// test, so whatever arrives is untrusted (Note [The worker channel is untrusted] in
// worker_pool.cpp): a frame is a magic, a length and the payload, and anything else — a wrong
// magic, a length past kMaxFramePayload, bytes a kernel wrote to the wrong fd — is a
// ProtocolError, which costs the running check (crashed, "protocol error") and the worker, never
// the run.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace opconform::harness {

inline constexpr std::string_view kFrameMagic = "OPC1";
inline constexpr uint32_t kMaxFramePayload = 64u << 20;  // a result with a huge message still fits

struct ProtocolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// kFrameMagic, the payload's length (4 bytes, little-endian), the payload.
std::string encode_frame(std::string_view payload);

// Writes every byte (retrying after EINTR and short writes); false when the fd refuses.
bool write_all(int fd, std::string_view bytes);

// Collects bytes as they arrive and cuts them into payloads.
class FrameReader {
 public:
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next complete payload; nullopt while one is incomplete; throws ProtocolError for bytes
  // that are no frame.
  std::optional<std::string> next();
  bool empty() const { return buffer_.empty(); }

 private:
  std::string buffer_;
};

}  // namespace opconform::harness
