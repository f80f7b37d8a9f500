// Learning what a library registers without loading it here: a child process (sandboxed like a
// worker) loads it and sends back its manifest (adapters/library_manifest.h) in a frame, or the
// error; a crash, a hang or an early exit of the child is the load's result. Note [No plugin
// code in the harness] in library_probe.cpp.
#pragma once
#include <optional>
#include <string>

#include "opconform/adapters/library_manifest.h"
#include "opconform/core/registry.h"
#include "opconform/harness/worker_sandbox.h"
#include "opconform/reports/report.h"

namespace opconform::harness {

struct ProbeResult {
  std::optional<adapters::LibraryManifest> manifest;  // when the library loaded
  std::optional<reports::CaseResult> failure;          // otherwise: a "load" result saying why
};

// Loads `path` with `plugin_options` in a child that takes its schemas from `schemas` (the
// reference), within `timeout_s`. Never throws for anything the library does.
ProbeResult probe_library(const std::string& path, const Registry& schemas, double timeout_s,
                          const SandboxOptions& sandbox, const adapters::PluginOptions& plugin_options = {});

// The manifest as one JSON text and back (the probe's message); manifest_from_json throws
// ProtocolError (worker_frames.h) for a text that is not one.
std::string manifest_to_json(const adapters::LibraryManifest& manifest);
adapters::LibraryManifest manifest_from_json(const std::string& text);

}  // namespace opconform::harness
