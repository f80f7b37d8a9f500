#include "opconform/harness/worker_frames.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>

namespace opconform::harness {
namespace {

// The first bytes as text for the message, control bytes as '.', so a report can say what came.
std::string shown(std::string_view bytes) {
  std::string out;
  for (char c : bytes.substr(0, 24)) out += std::isprint(static_cast<unsigned char>(c)) ? c : '.';
  return "'" + out + (bytes.size() > 24 ? "...'" : "'");
}

}  // namespace

std::string encode_frame(std::string_view payload) {
  const auto n = static_cast<uint32_t>(payload.size());
  std::string out(kFrameMagic);
  for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xFF);
  out.append(payload);
  return out;
}

bool write_all(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::optional<std::string> FrameReader::next() {
  const size_t header = kFrameMagic.size() + 4;
  const size_t have_magic = std::min(buffer_.size(), kFrameMagic.size());
  if (std::string_view(buffer_).substr(0, have_magic) != kFrameMagic.substr(0, have_magic))
    throw ProtocolError("bytes that are not a frame: " + shown(buffer_));
  if (buffer_.size() < header) return std::nullopt;
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<unsigned char>(buffer_[kFrameMagic.size() + i])) << (8 * i);
  if (n > kMaxFramePayload) throw ProtocolError("a frame of " + std::to_string(n) + " bytes, more than the limit");
  if (buffer_.size() < header + n) return std::nullopt;
  std::string payload = buffer_.substr(header, n);
  buffer_.erase(0, header + n);
  return payload;
}

}  // namespace opconform::harness
