// Note [No plugin code in the harness]: a library under test may crash, hang, fork or lie in
// its constructor, its register_ops or its destructor, and may behave differently the second
// time it is loaded. So the harness never dlopens it: a probe child (sandboxed like a worker,
// its output captured) loads it once and sends a manifest of what it registered; the harness
// plans, lists and diagnoses from that data; each worker loads the library itself when it
// starts (worker_pool.h: WorkerOptions::setup), so a load that crashes or hangs there costs
// checks, not the run; no process that loaded it runs its destructors (workers end with
// _exit). The exit status and the report files come only from the harness. `--jobs 0` is the
// one exception, asked for by name: the library runs in this process, without isolation.
#include "opconform/harness/library_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <span>
#include <nlohmann/json.hpp>

#include "opconform/harness/child_process.h"
#include "opconform/harness/worker_frames.h"
#include "opconform/harness/worker_sandbox.h"
#include "opconform/harness/worker_pool.h"

namespace opconform::harness {
namespace {

using Clock = std::chrono::steady_clock;

// The probe child (Note [One way to run a child]: the harness's end of each channel is closed and
// PR_SET_PDEATHSIG set before this runs).
int probe_child(const std::string& path, const adapters::PluginOptions& plugin_options, const Registry& schemas,
                const SandboxOptions& sandbox, pid_t parent, int channel, int output) {
  close_inherited_fds({channel, output});  // Note [A worker holds only its own descriptors]
  enter_sandbox(sandbox, parent);
  const int replies = ::fcntl(channel, F_DUPFD_CLOEXEC, 900);
  if (replies < 0) return 5;
  ::close(channel);
  ::dup2(output, STDOUT_FILENO), ::dup2(output, STDERR_FILENO), ::close(output);
  if (const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC); null >= 0) ::dup2(null, STDIN_FILENO), ::close(null);
  signal(SIGPIPE, SIG_IGN);
  default_fatal_signals();
  std::string message;
  try {
    // Never destroyed: unloading would run the library's destructors, which may crash or forge.
    auto* scratch = new Registry;
    auto* library =
        adapters::load_plugin(path, *scratch, {.schemas = &schemas, .plugin_options = plugin_options}).release();
    message = "M" + manifest_to_json(adapters::describe_library(*library, *scratch));
  } catch (const std::exception& e) {
    message = std::string("E") + e.what();
  }
  return write_all(replies, encode_frame(message)) ? 0 : 4;  // _exit: no destructor of the library runs
}

// What the probe child said: its message (a frame on the channel) and the tail of its output.
struct ProbeReplies {
  FrameReader frames;
  std::optional<std::string> message;
  std::string output_tail;
  bool protocol_error = false;

  void channel(std::string_view bytes) {
    frames.feed(bytes);
    try {
      if (auto payload = frames.next(); payload && !message) message = std::move(*payload);
    } catch (const ProtocolError&) {
      protocol_error = true;
    }
  }
  void output(std::string_view bytes) {
    output_tail.append(bytes);
    if (output_tail.size() > 2048) output_tail.erase(0, output_tail.size() - 2048);
  }
};

// Reads the channel (0) and the output (1) until the child is gone (waitpid, not EOF: a process
// the constructor forked may hold the pipes) or the time is up; false when it is.
bool read_until_exit(ChildProcess& child, double timeout_s, ProbeReplies& replies) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  char chunk[65536];
  for (bool exited = false; !exited;) {
    exited = child.poll_exit().has_value();
    if (!exited && Clock::now() >= deadline) return false;
    pollfd fds[2] = {{child.fd(0), POLLIN, 0}, {child.fd(1), POLLIN, 0}};
    if (wait_readable(fds, std::chrono::milliseconds(exited ? 0 : 20)) <= 0) continue;
    for (size_t i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      const ssize_t n = child.read(i, chunk, sizeof chunk);
      if (n <= 0) continue;
      const std::string_view bytes(chunk, static_cast<size_t>(n));
      if (i == 0) replies.channel(bytes);
      else replies.output(bytes);
    }
    // Once it exited, what it wrote before it ended is all read now.
    while (exited && !replies.message && !replies.protocol_error && child.readable(0)) {
      const ssize_t n = child.read(0, chunk, sizeof chunk);
      if (n <= 0) break;
      replies.channel(std::string_view(chunk, static_cast<size_t>(n)));
    }
  }
  return true;
}

reports::CaseResult load_result(const std::string& path, reports::Outcome outcome, std::string message) {
  reports::CaseResult r;
  r.op = path, r.check = "load", r.outcome = outcome, r.message = std::move(message);
  return r;
}

}  // namespace

ProbeResult probe_library(const std::string& path, const Registry& schemas, double timeout_s,
                          const SandboxOptions& sandbox, const adapters::PluginOptions& plugin_options) {
  const pid_t parent = ::getpid();
  ChildProcess child = ChildProcess::start(
      {ChildChannels::from_child, ChildChannels::from_child}, [&](std::span<const int> ends) {
        return probe_child(path, plugin_options, schemas, sandbox, parent, ends[0], ends[1]);
      });
  if (const auto& failure = child.failure())
    return {std::nullopt, load_result(path, reports::Outcome::failed,
                                      std::string(failure->step == StartFailure::channels ? "cannot create a pipe: "
                                                                                          : "cannot fork: ") +
                                          std::strerror(failure->error))};
  ProbeReplies replies;
  const bool timed_out = !read_until_exit(child, timeout_s, replies);
  // The child's group (whatever a constructor started), and the child if it is still alive.
  const ChildExit exit = child.stop();
  child.close_all();
  const std::optional<std::string>& message = replies.message;
  const std::string tail = replies.output_tail.empty() ? "" : "; its last output: " + replies.output_tail;
  const std::string who = "plugin '" + path + "': ";
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", timeout_s);
  if (timed_out)
    return {std::nullopt, load_result(path, reports::Outcome::timed_out,
                                      who + "loading it did not finish within " + seconds +
                                          " s (a library constructor or register_ops that never returns?)" + tail)};
  if (replies.protocol_error)
    return {std::nullopt, load_result(path, reports::Outcome::crashed,
                                      who + "protocol error: the process loading it sent bytes that are no frame "
                                            "(does its constructor write to fds it does not own?)" + tail)};
  if (message && message->rfind('M', 0) == 0) {
    try {
      return {manifest_from_json(message->substr(1)), std::nullopt};
    } catch (const ProtocolError& e) {
      return {std::nullopt, load_result(path, reports::Outcome::crashed, who + "protocol error: " + e.what())};
    }
  }
  if (message && message->rfind('E', 0) == 0)
    return {std::nullopt, load_result(path, reports::Outcome::failed, message->substr(1))};
  if (exit.killed())
    return {std::nullopt, load_result(path, reports::Outcome::crashed,
                                      who + "loading it crashed the process (" + describe_signal(exit.signal()) +
                                          "), in a library constructor or in register_ops" + tail)};
  return {std::nullopt,
          load_result(path, reports::Outcome::crashed,
                      who + "the process loading it exited with status " +
                          std::to_string(exit.code()) +
                          " before it said what the library registered (a library constructor called exit?)" + tail)};
}

std::string manifest_to_json(const adapters::LibraryManifest& m) {
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& o : m.ops) {
    nlohmann::json op = {{"name", o.name}, {"schema", o.schema}, {"cpu", o.cpu}, {"cuda", o.cuda},
                         {"fake", o.fake}, {"backward", o.backward},
                         {"reference_fake", o.declared.reference_fake}, {"sample_builder", o.declared.sample_builder},
                         {"constraints", o.declared.constraints}};
    if (o.dtypes) {
      op["dtypes"] = nlohmann::json::array();
      for (DType d : *o.dtypes) op["dtypes"].push_back(std::string(name(d)));
    }
    ops.push_back(std::move(op));
  }
  nlohmann::json problems = nlohmann::json::array();
  for (const auto& p : m.problems) problems.push_back({{"op", p.op}, {"message", p.message}});
  nlohmann::json options = nlohmann::json::array();
  for (const auto& o : m.option_specs)
    options.push_back({{"name", o.name}, {"help", o.help}, {"default", o.default_value}, {"required", o.required},
                       {"repeatable", o.repeatable}});
  const nlohmann::json j = {{"name", m.name},         {"version", m.version}, {"origin", m.origin},
                            {"ops", std::move(ops)},  {"problems", std::move(problems)},
                            {"dangling", m.dangling}, {"options", std::move(options)}};
  // Invalid UTF-8 in a library's strings is replaced, not a reason to lose the manifest.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

adapters::LibraryManifest manifest_from_json(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    adapters::LibraryManifest m;
    m.name = j.at("name").get<std::string>(), m.version = j.at("version").get<std::string>();
    m.origin = j.at("origin").get<std::string>();
    for (const auto& op : j.at("ops")) {
      adapters::ManifestOp o;
      o.name = op.at("name").get<std::string>(), o.schema = op.at("schema").get<std::string>();
      o.cpu = op.at("cpu").get<bool>(), o.cuda = op.at("cuda").get<bool>();
      o.fake = op.at("fake").get<bool>(), o.backward = op.at("backward").get<bool>();
      o.declared.reference_fake = op.at("reference_fake").get<bool>();
      o.declared.sample_builder = op.at("sample_builder").get<bool>();
      o.declared.constraints = op.at("constraints").get<bool>();
      if (op.contains("dtypes")) {
        o.dtypes.emplace();
        for (const auto& d : op.at("dtypes")) {
          auto dtype = parse_dtype(d.get<std::string>());
          if (!dtype) throw ProtocolError("a dtype that is none: '" + d.get<std::string>().substr(0, 40) + "'");
          o.dtypes->push_back(*dtype);
        }
      }
      m.ops.push_back(std::move(o));
    }
    for (const auto& p : j.at("problems"))
      m.problems.push_back({p.at("op").get<std::string>(), p.at("message").get<std::string>()});
    m.dangling = j.at("dangling").get<std::vector<std::string>>();
    for (const auto& o : j.at("options"))
      m.option_specs.push_back({o.at("name").get<std::string>(), o.at("help").get<std::string>(),
                                o.at("default").get<std::string>(), o.at("required").get<bool>(),
                                o.at("repeatable").get<bool>()});
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw ProtocolError(std::string("a manifest that does not parse: ") + e.what());
  }
}

}  // namespace opconform::harness
