#!/usr/bin/env python3
"""The GPU bundle: packed here (scripts/test-gpu.sh pack), run on a machine with an NVIDIA GPU.

    python3 scripts/gpu_bundle.py pack --build build/default --root . --bundle build/gpu-bundle
    BUNDLE/run.sh [--out DIR] [--jobs N] [--filter SUBSTRING]   (this file, copied as run.py)

pack: the tests ctest labels `cuda` (their binaries), the opconform program, the CUDA plugins and
fixtures, stripped of debug info, at their paths relative to the source root; the shared
libraries they need that a GPU machine does not have; manifest.json (the tests' command lines,
the checks to run, the build's source root).

run: puts the bundle where the binaries expect their fixtures (the build's source root: a
symlink to the bundle when that path is free), finds CUDA's libraries on the machine, runs every
test and then `opconform check --device cuda` on each CUDA plugin, and prints a ctest-style
summary. Exit 1 when a test fails or a check could not run (a check that finds disagreements
exits 1 by design: its report is the result, and its summary line is printed).
"""
import argparse
import glob
import json
import os
import shutil
import site
import subprocess
import sys
import time

# Libraries every Linux machine has, or that must come from the GPU machine (driver, CUDA).
SYSTEM_LIBS = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so",
               "libgcc_s.so", "libstdc++.so")
GPU_MACHINE_LIBS = ("libcuda.so", "libcudart.so", "libcublas", "libcudnn", "libnvrtc", "libnvJitLink",
                    "libcufft", "libcurand", "libcusparse", "libcusolver", "libnvidia")

# The CUDA plugins checked by `opconform check --device cuda` (relative to the build directory).
CHECKED_PLUGINS = (
    ("cuda-libs", "adapters/cuda_libs/libopconform_cuda_libs_plugin.so", []),
    ("cuda-libs-tf32", "adapters/cuda_libs/libopconform_cuda_libs_tf32_plugin.so", []),
    ("cuda-fixture", "harness/libopconform_cuda_plugin.so", []),
)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, **kw).stdout


def needed_libs(path):
    out = []
    for line in run(["ldd", path]).splitlines():
        parts = line.split("=>")
        if len(parts) != 2:
            continue
        target = parts[1].split("(")[0].strip()
        name = os.path.basename(target)
        if not target or target == "not" or any(name.startswith(s) for s in SYSTEM_LIBS + GPU_MACHINE_LIBS):
            continue
        out.append(target)
    return out


def pack(args):
    root, build, bundle = os.path.realpath(args.root), os.path.realpath(args.build), os.path.realpath(args.bundle)
    tests = json.loads(run(["ctest", "--test-dir", build, "-L", "cuda", "--show-only=json-v1"]))["tests"]
    files, manifest_tests = set(), []
    for t in tests:
        argv = t.get("command") or []
        if not argv:
            continue
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        files.add(os.path.realpath(argv[0]))
        manifest_tests.append({"name": t["name"], "argv": argv, "cwd": props.get("WORKING_DIRECTORY", build),
                               "env": props.get("ENVIRONMENT", [])})
    files.add(os.path.join(build, "harness/opconform"))
    checks = []
    for name, rel, extra in CHECKED_PLUGINS:
        path = os.path.join(build, rel)
        if os.path.exists(path):
            checks.append({"name": name, "library": path, "extra": extra})
    # Every plugin and fixture the tests may open: the shared libraries of the CUDA folders.
    for pattern in ("adapters/cuda_libs/*.so", "harness/*.so", "adapters/tests/*.so", "adapters/*.so"):
        files.update(os.path.realpath(p) for p in glob.glob(os.path.join(build, pattern)))
    libs = set()
    for f in sorted(files):
        dest = os.path.join(bundle, os.path.relpath(f, root))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy2(f, dest)
        subprocess.run(["strip", "--strip-debug", dest], check=False)
        libs.update(needed_libs(f))
    for lib in sorted(libs):
        shutil.copy2(lib, os.path.join(bundle, "lib", os.path.basename(lib)))
    manifest = {"root": root, "build": build, "tests": manifest_tests, "checks": checks}
    with open(os.path.join(bundle, "manifest.json"), "w") as out:
        json.dump(manifest, out, indent=1)
    shutil.copy2(os.path.abspath(__file__), os.path.join(bundle, "run.py"))
    with open(os.path.join(bundle, "run.sh"), "w") as out:
        out.write('#!/bin/sh\nexec python3 "$(dirname "$0")/run.py" run "$@"\n')
    os.chmod(os.path.join(bundle, "run.sh"), 0o755)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(bundle) for f in fs)
    print(f"gpu bundle: {bundle}: {len(manifest_tests)} tests, {len(checks)} plugin checks, "
          f"{len(libs)} libraries, {size / 2**20:.1f} MiB")


def cuda_library_dirs():
    dirs = []
    for pattern in ("/usr/local/cuda*/lib64", "/usr/local/cuda*/targets/x86_64-linux/lib", "/usr/lib/x86_64-linux-gnu"):
        dirs += sorted(glob.glob(pattern))
    sites = list(site.getsitepackages()) + [site.getusersitepackages()]
    for s in sites:
        dirs += sorted(glob.glob(os.path.join(s, "nvidia", "*", "lib")))
        dirs += sorted(glob.glob(os.path.join(s, "nvidia", "cu*", "lib")))
    return [d for d in dirs if os.path.isdir(d)]


def place_bundle(bundle, root):
    """The binaries name their fixtures by the build's paths: make `root` lead to the bundle."""
    if os.path.realpath(root) == bundle:
        return None
    if os.path.lexists(root):
        return f"{root} exists and is not this bundle: tests that open fixtures by path may fail"
    try:
        os.makedirs(os.path.dirname(root), exist_ok=True)
        os.symlink(bundle, root)
        return None
    except OSError as e:
        return f"cannot link {root} to the bundle ({e}): tests that open fixtures by path may fail"


def relocate(path, root, bundle):
    return os.path.join(bundle, os.path.relpath(path, root)) if path.startswith(root + "/") else path


def run_bundle(args):
    bundle = os.path.dirname(os.path.realpath(__file__))
    with open(os.path.join(bundle, "manifest.json")) as f:
        manifest = json.load(f)
    root = manifest["root"]
    problem = place_bundle(bundle, root)
    if problem:
        print("warning:", problem)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = ":".join([os.path.join(bundle, "lib")] + cuda_library_dirs() +
                                      [env.get("LD_LIBRARY_PATH", "")])
    out_dir = os.path.realpath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    tests = [t for t in manifest["tests"] if args.filter in t["name"]]
    results = {"passed": [], "failed": [], "skipped": []}
    start = time.time()
    for i, t in enumerate(tests, 1):
        argv = [relocate(a, root, bundle) for a in t["argv"]]
        test_env = dict(env)
        for kv in t["env"]:
            k, _, v = kv.partition("=")
            test_env[k] = v
        t0 = time.time()
        try:
            p = subprocess.run(argv, cwd=relocate(t["cwd"], root, bundle) if os.path.isdir(relocate(t["cwd"], root, bundle)) else bundle,
                               env=test_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=args.timeout)
            output, code = p.stdout, p.returncode
        except subprocess.TimeoutExpired as e:
            output, code = (e.stdout or "") + "\n(timed out)", -1
        state = "failed" if code != 0 else ("skipped" if "[  SKIPPED ]" in output else "passed")
        results[state].append(t["name"])
        print(f"{i:4}/{len(tests)} Test: {t['name']:<70} {state.capitalize()}  {time.time() - t0:.2f} sec")
        if state == "failed":
            print("\n".join("    " + line for line in output.splitlines()[-25:]))
    checks_ok = True
    for c in manifest["checks"]:
        if args.filter and args.filter not in c["name"]:
            continue
        library = relocate(c["library"], root, bundle)
        report = os.path.join(out_dir, c["name"])
        cmd = [relocate(os.path.join(manifest["build"], "harness/opconform"), root, bundle), "check", "--library",
               library, "--device", "cuda", "-j", str(args.jobs), "--report-dir", report] + c["extra"]
        t0 = time.time()
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        summary = [line for line in p.stdout.splitlines() if " results in " in line]
        print(f"check {c['name']}: exit {p.returncode}, {time.time() - t0:.1f} s: {summary[-1] if summary else p.stdout[-2000:]}")
        checks_ok = checks_ok and p.returncode in (0, 1)
    n = len(tests)
    print(f"\n{100 * (n - len(results['failed'])) // max(n, 1)}% tests passed, {len(results['failed'])} tests failed "
          f"out of {n} ({len(results['skipped'])} skipped)\n\nTotal Test time (real) = {time.time() - start:.2f} sec")
    for name in results["failed"]:
        print("  FAILED:", name)
    return 0 if not results["failed"] and checks_ok else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--build", required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--bundle", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", default="gpu-results", help="where the check reports go")
    r.add_argument("--jobs", "-j", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    r.add_argument("--filter", default="", help="only tests and checks whose name contains this")
    r.add_argument("--timeout", type=float, default=600, help="seconds per test")
    args = parser.parse_args()
    if args.mode == "pack":
        pack(args)
        return 0
    return run_bundle(args)


if __name__ == "__main__":
    sys.exit(main())
