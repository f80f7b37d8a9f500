#!/usr/bin/python3
"""Turns a Google Benchmark JSON file into the ratio tables of bench/README.md.

Usage: dispatch_bench --benchmark_format=json --benchmark_repetitions=5 > out.json
       /usr/bin/python3 bench/ratio_table.py out.json
The fastest repetition of each benchmark is used (the estimate least disturbed by the rest
of the machine); run with --benchmark_enable_random_interleaving=true so that slow phases of
the machine hit every benchmark alike.
"""
import json
import sys


def fastest(path):
    with open(path) as f:
        data = json.load(f)
    times = {}
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue
        name = b.get("run_name", b["name"])
        times[name] = min(times.get(name, float("inf")), b["real_time"])
    return times


def main():
    t = fastest(sys.argv[1])
    print("| benchmark | ns/call |")
    print("| --- | --- |")
    for name, ns in t.items():
        print(f"| {name} | {ns:.2f} |")
    direct = t.get("BM_direct_call")
    if direct is None:
        return
    if "BM_custom_op_call" in t:
        print()
        print("| call | overhead over a direct call (ns) | goal |")
        print("| --- | --- | --- |")
        print(f"| custom_op | {t['BM_custom_op_call'] - direct:.2f} | < 100 |")
    ours = {k: t[f"BM_dispatch_{k}"] - direct for k in ("unboxed", "boxed") if f"BM_dispatch_{k}" in t}
    if not ours:
        return
    print()
    # Each framework's overhead over its own direct call; the goals of issue 21.
    goals = {"unboxed": 0.3, "boxed": 0.5}
    print("| call | opconform overhead (ns) | libtorch overhead (ns) | ratio | goal |")
    print("| --- | --- | --- | --- | --- |")
    torch_direct = t.get("BM_libtorch_direct_call")
    for kind, ns in ours.items():
        theirs = None
        if torch_direct is not None and f"BM_libtorch_{kind}" in t:
            theirs = t[f"BM_libtorch_{kind}"] - torch_direct
        ratio = f"{ns / theirs:.2f}" if theirs else "n/a (no libtorch)"
        theirs_s = f"{theirs:.2f}" if theirs is not None else "n/a"
        print(f"| {kind} | {ns:.2f} | {theirs_s} | {ratio} | <= {goals[kind]} |")


if __name__ == "__main__":
    main()
