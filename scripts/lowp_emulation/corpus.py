import gzip, json, base64, numpy as np, glob
import os
CORPUS=os.environ.get("OPINFO_CORPUS", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../reference/tests/data/opinfo_corpus.jsonl.gz"))
NP={"float16":np.float16,"float32":np.float32,"float64":np.float64,"int64":np.int64,"int32":np.int32,
    "int16":np.int16,"int8":np.int8,"uint8":np.uint8,"bool":np.bool_,"bfloat16":np.uint16,
    "complex64":np.complex64,"complex128":np.complex128}
def bf16_to_f32(u16):
    return (np.asarray(u16,dtype=np.uint16).astype(np.uint32)<<np.uint32(16)).view(np.float32)
def f32_to_bf16(x):
    """RNE float32 -> bfloat16 bits (uint16); NaN kept NaN"""
    x=np.asarray(x,dtype=np.float32)
    u=x.view(np.uint32).astype(np.uint64)
    r=((u+np.uint64(0x7FFF)+((u>>np.uint64(16))&np.uint64(1)))>>np.uint64(16)).astype(np.uint16)
    nan=np.isnan(x)
    r=np.where(nan,np.uint16(0x7FC0),r)
    return r
def rbf(x):
    """round float32/float64 value to bf16, returned as float32 (double rounding via f32 for f64 input!)"""
    return bf16_to_f32(f32_to_bf16(np.asarray(x,dtype=np.float32)))
def rnd(x,dt):
    """float32 value(s) rounded to dt (bfloat16 or float16), returned as float32"""
    x=np.asarray(x,dtype=np.float32)
    return rbf(x) if dt=="bfloat16" else x.astype(np.float16).astype(np.float32)
class T:
    def __init__(s,d):
        s.dtype=d["t"]; s.sizes=d["sizes"]; s.strides=d["strides"]
        raw=base64.b64decode(d["data"])
        flat=np.frombuffer(raw,dtype=NP[s.dtype]).copy()
        s.flat=flat
        if flat.size==0 or 0 in s.sizes:
            s.raw=np.zeros(s.sizes,dtype=NP[s.dtype])
        else:
            it=np.dtype(NP[s.dtype]).itemsize
            s.raw=np.lib.stride_tricks.as_strided(flat,s.sizes,[st*it for st in s.strides]).copy()
    def f32(s):
        if s.dtype=="bfloat16": return bf16_to_f32(s.raw)
        return s.raw.astype(np.float32)
    def val(s):
        if s.dtype=="bfloat16": return bf16_to_f32(s.raw)
        return s.raw
    def __repr__(s): return f"T({s.dtype},{s.sizes},{s.strides})"
def dec(v):
    if v is None: return None
    if isinstance(v,dict):
        if "t" in v: return T(v)
        if "default" in v: return "DEFAULT"
        if "i" in v: return v["i"]
        if "f" in v:
            f=v["f"]; return float(f) if isinstance(f,str) else f
        if "b" in v: return v["b"]
        if "l" in v: return [dec(x) for x in v["l"]]
        for k in ("str","dtype","device","layout","memory_format"):
            if k in v: return v[k]
        if "c" in v: return complex(*v["c"])
    raise ValueError(v)
def load(op=None):
    for line in gzip.open(CORPUS,"rt"):
        r=json.loads(line)
        if op and r["op"]!=op: continue
        r["A"]=[dec(a) for a in r["args"]]
        r["CPU"]=[dec(a) for a in r["cpu"]] if r["cpu"] is not None else None
        yield r
def close(actual,expected,dtype):
    """assert_close default; actual, expected as float64 arrays"""
    rtol,atol={"bfloat16":(1.6e-2,1e-5),"float16":(1e-3,1e-5),"float32":(1.3e-6,1e-5),"float64":(1e-7,1e-7)}[dtype]
    a=np.asarray(actual,np.float64); e=np.asarray(expected,np.float64)
    both_nan=np.isnan(a)&np.isnan(e)
    ok=(np.abs(a-e)<=atol+rtol*np.abs(e))|both_nan|(a==e)
    return bool(ok.all())
def exact(actual,expected):
    a=np.asarray(actual,np.float64); e=np.asarray(expected,np.float64)
    return bool(((a==e)|(np.isnan(a)&np.isnan(e))).all()) and a.shape==e.shape
