#!/usr/bin/env python3
"""Records PyTorch's own OpInfo samples at the aten level, for the reference's OpInfo replay.

Runs where PyTorch (with CUDA, when there is a GPU) is installed; nothing of opconform is needed:

    python3 scripts/record-opinfo-corpus.py --ops ops.txt --out opinfo_corpus

ops.txt holds the overloads to record, one per line (`opconform list --names`). For every OpInfo
of torch's op_db, every dtype both support and every sample of its `reference_inputs`, the op runs
under a TorchDispatchMode that sees each aten call (after CompositeImplicit decompositions). A call
to one of the listed overloads is recorded with its arguments (before the call, in schema order;
an argument left to its default is marked so) and what torch returned on CPU — and, when CUDA is
available, what the same call returned with every tensor moved to the GPU. Calls that draw random
numbers are not recorded. Identical calls are kept once.

One JSON object per line (reference/tests/opinfo_replay_test.cpp reads them):
    {"op": "aten::add.Tensor", "source": "add/float32",
     "args": [<value>...], "cpu": [<value>...], "cuda": [<value>...] | "same" | null, "cuda_error": str?}
("same": bitwise the CPU result). Written gzip-compressed, in parts of at most --part-mib MiB.
a <value> is null (None), {"default": true}, {"i": int}, {"f": float | "nan" | "inf" | "-inf"},
{"b": bool}, {"c": [re, im]}, {"str": s}, {"dtype": "float32"}, {"device": "cpu"},
{"layout": "strided"}, {"memory_format": "contiguous_format"}, {"l": [<value>...]}, or a tensor
{"t": dtype, "sizes": [...], "strides": [...], "data": base64 of the elements its strides reach,
little-endian, from its first element}. Outputs are recorded contiguous.
"""
import argparse
import base64
import gzip
import os
import hashlib
import json
import math
import sys
import time

import torch


def load_op_db():
    """torch's op_db. Its test utilities import test-only packages (expecttest, ...) that a plain
    torch install may lack; those are stubbed, as nothing of them is used to make samples."""
    import importlib
    import types
    import unittest
    for _ in range(8):
        try:
            return importlib.import_module("torch.testing._internal.common_methods_invocations").op_db
        except ModuleNotFoundError as e:
            stub = types.ModuleType(e.name)
            stub.TestCase = unittest.TestCase
            sys.modules[e.name] = stub
            print(f"stubbed the missing module {e.name}", file=sys.stderr)
    raise SystemExit("could not import torch's op_db")
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

DTYPES = {
    torch.bool: "bool", torch.uint8: "uint8", torch.int8: "int8", torch.int16: "int16", torch.int32: "int32",
    torch.int64: "int64", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32",
    torch.float64: "float64", torch.complex64: "complex64", torch.complex128: "complex128",
}
# The order dtypes are tried in, so a time limit per OpInfo cuts the rarer ones.
PRIORITY = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool,
            torch.uint8, torch.int8, torch.int16, torch.complex64, torch.complex128]
BITS_VIEW = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.bool: torch.uint8}
MEMORY_FORMATS = {torch.contiguous_format: "contiguous_format", torch.preserve_format: "preserve_format",
                  torch.channels_last: "channels_last", torch.channels_last_3d: "channels_last_3d"}


class Unrecordable(Exception):
    pass


def number(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def tensor_value(t, keep_strides):
    if t.dtype not in DTYPES or t.layout != torch.strided or t.is_quantized:
        raise Unrecordable(f"tensor of {t.dtype} / {t.layout}")
    t = t.detach().cpu()
    if not keep_strides:
        t = t.contiguous()
    sizes, strides = list(t.shape), list(t.stride())
    span = 0 if t.numel() == 0 else 1 + sum((s - 1) * st for s, st in zip(sizes, strides))
    flat = torch.as_strided(t, (span,), (1,), t.storage_offset()).clone()
    if flat.dtype in BITS_VIEW:
        flat = flat.view(BITS_VIEW[flat.dtype])
    data = flat.numpy().tobytes() if span else b""
    return {"t": DTYPES[t.dtype], "sizes": sizes, "strides": strides, "data": base64.b64encode(data).decode()}


def value(v, keep_strides=True):
    if v is None:
        return None
    if isinstance(v, torch.Tensor):
        return tensor_value(v, keep_strides)
    if isinstance(v, bool):
        return {"b": v}
    if isinstance(v, int):
        return {"i": v}
    if isinstance(v, float):
        return {"f": number(v)}
    if isinstance(v, complex):
        return {"c": [number(v.real), number(v.imag)]}
    if isinstance(v, str):
        return {"str": v}
    if isinstance(v, torch.dtype):
        if v not in DTYPES:
            raise Unrecordable(f"dtype {v}")
        return {"dtype": DTYPES[v]}
    if isinstance(v, torch.device):
        return {"device": v.type}
    if isinstance(v, torch.layout):
        return {"layout": str(v).replace("torch.", "")}
    if isinstance(v, torch.memory_format):
        return {"memory_format": MEMORY_FORMATS[v]}
    if isinstance(v, (list, tuple)):
        return {"l": [value(e, keep_strides) for e in v]}
    raise Unrecordable(f"argument of type {type(v).__name__}")


def schema_args(func, args, kwargs):
    """The call's arguments in schema order; {"default": true} where the schema's default applies."""
    out = []
    for i, a in enumerate(func._schema.arguments):
        if i < len(args):
            out.append(value(args[i]))
        elif a.name in kwargs:
            out.append(value(kwargs[a.name]))
        elif a.has_default_value():
            out.append({"default": True})
        else:
            raise Unrecordable(f"argument {a.name} missing")
    return out


def to_cuda(v):
    if isinstance(v, torch.Tensor):
        return v.detach().cuda()
    if isinstance(v, torch.device) and v.type == "cpu":
        return torch.device("cuda")
    return v


def op_name(func):
    name = func._schema.name
    return name if func._overloadname == "default" else f"{name}.{func._overloadname}"


def elements(v):
    if isinstance(v, torch.Tensor):
        return v.numel()
    if isinstance(v, (list, tuple)):
        return sum(elements(e) for e in v)
    if isinstance(v, dict):
        return sum(elements(e) for e in v.values())
    return 0


class Recorder(TorchDispatchMode):
    def __init__(self, wanted, out, source, seen, counts, limit, max_elements):
        super().__init__()
        self.wanted, self.out, self.source, self.seen, self.counts, self.limit = wanted, out, source, seen, counts, limit
        self.max_elements = max_elements

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = op_name(func)
        if (name not in self.wanted or torch.Tag.nondeterministic_seeded in func.tags or
                self.counts.get(name, 0) >= self.limit or elements((args, kwargs)) > self.max_elements):
            return func(*args, **kwargs)
        try:
            recorded_args = schema_args(func, args, kwargs)
        except Unrecordable:
            return func(*args, **kwargs)
        cuda_args = tree_map(to_cuda, (args, kwargs)) if torch.cuda.is_available() else None
        result = func(*args, **kwargs)
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        try:
            entry = {"op": name, "source": self.source, "args": recorded_args,
                     "cpu": [value(r, keep_strides=False) for r in results], "cuda": None}
        except Unrecordable:
            return result
        key = hashlib.sha1(json.dumps([name, recorded_args], sort_keys=True).encode()).hexdigest()
        if key in self.seen:
            return result
        self.seen.add(key)
        if cuda_args is not None:
            try:
                on_gpu = func(*cuda_args[0], **cuda_args[1])
                on_gpu = list(on_gpu) if isinstance(on_gpu, (tuple, list)) else [on_gpu]
                cuda = [value(r, keep_strides=False) for r in on_gpu]
                # Bitwise the CPU result: said so, not stored twice.
                entry["cuda"] = "same" if cuda == entry["cpu"] else cuda
            except Exception as e:  # a CUDA refusal is recorded, not fatal
                entry["cuda_error"] = str(e).splitlines()[0][:200]
        self.counts[name] = self.counts.get(name, 0) + 1
        self.out.write(json.dumps(entry, separators=(",", ":")) + "\n")
        return result


class PartWriter:
    """Lines into <prefix>-00.jsonl.gz, -01, ...: a new part past `mib` compressed MiB."""

    def __init__(self, prefix, mib):
        self.prefix, self.limit, self.index, self.raw, self.gz = prefix, mib * 2**20, 0, None, None
        self.open()

    def open(self):
        self.raw = open(f"{self.prefix}-{self.index:02d}.jsonl.gz", "wb")
        self.gz = gzip.GzipFile(fileobj=self.raw, mode="wb", compresslevel=6)

    def write(self, line):
        self.gz.write(line.encode())
        if self.raw.tell() > self.limit:
            self.close()
            self.index += 1
            self.open()

    def close(self):
        self.gz.close()
        self.raw.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", required=True, help="file with one overload name per line")
    p.add_argument("--out", required=True)
    p.add_argument("--per-op", type=int, default=200, help="most calls recorded per overload")
    p.add_argument("--seconds-per-opinfo", type=float, default=20)
    p.add_argument("--deadline", type=float, default=0, help="stop after this many seconds (0: none)")
    p.add_argument("--max-elements", type=int, default=512, help="calls with more tensor elements are not recorded")
    p.add_argument("--part-mib", type=float, default=14)
    a = p.parse_args()
    wanted = {l.strip() for l in open(a.ops) if l.strip()}
    op_db = load_op_db()
    seen, counts = set(), {}
    start = time.time()
    # OpInfos named like a wanted overload first, so a deadline cuts the least useful ones.
    bases = {w.split("::")[1].split(".")[0].lstrip("_") for w in wanted}
    op_db = sorted(op_db, key=lambda info: info.name.split(".")[-1] not in bases)
    out = PartWriter(a.out, a.part_mib)
    try:
        for info in op_db:
            if a.deadline and time.time() - start > a.deadline:
                print(f"stopped at the deadline, before {info.name}", file=sys.stderr)
                break
            began = time.time()
            for dtype in [d for d in PRIORITY if d in info.supported_dtypes("cpu")]:
                if time.time() - began > a.seconds_per_opinfo:
                    break
                source = f"{info.name}{'.' + info.variant_test_name if info.variant_test_name else ''}/{DTYPES[dtype]}"
                try:
                    samples = list(info.reference_inputs("cpu", dtype, requires_grad=False))
                except Exception:
                    continue
                for sample in samples:
                    torch.manual_seed(0)
                    try:
                        with Recorder(wanted, out, source, seen, counts, a.per_op, a.max_elements):
                            info.op(sample.input, *sample.args, **sample.kwargs)
                    except Exception:
                        pass  # an error input of torch's own; nothing recorded past it
    finally:
        out.close()
    total = sum(counts.values())
    print(f"recorded {total} calls over {len(counts)} overloads in {time.time() - start:.0f} s", file=sys.stderr)
    for name in sorted(wanted - set(counts)):
        print(f"  not reached: {name}", file=sys.stderr)


if __name__ == "__main__":
    main()
