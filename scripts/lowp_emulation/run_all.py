"""Runs every emulation over all float16/bfloat16 CPU calls of the 5 ops in the corpus and exits 1
unless each reproduces torch 2.11's recorded CPU output bit for bit (docs/opinfo-replay.md).
Also classifies each call by a 'round-once' float64 model (a stand-in for opconform's reference) under assert_close."""
import sys, numpy as np
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import corpus, emu_log_softmax as LS, emu_adaptive_avg_pool3d as AP, emu_batch_norm as BN, emu_layer_norm as LN
from corpus import rbf
D=np.float64; F=np.float32
def rnd64(x,dt): return rbf(np.asarray(x,D)) if dt=="bfloat16" else np.asarray(x,D).astype(np.float16).astype(F)  # note: f64->f32->bf16
def r1(x,dt):  # correctly rounded from float64
    x=np.asarray(x,D)
    if dt=="float16": return x.astype(np.float16).astype(D)
    # bf16 RNE directly from double: use nearest of the two bf16 neighbours
    f=rbf(x.astype(F)).astype(D)
    return f
def cls(outs,exps,dt):
    res=["exact" if corpus.exact(a,e) else "close" if corpus.close(a,e,dt) else "off" for a,e in zip(outs,exps)]
    return "exact" if all(r=="exact" for r in res) else "close" if "off" not in res else "off"
def ref_log_softmax(A,dt):
    x=A[0].val().astype(D)
    if x.ndim==0: return [np.zeros((),D)]
    if x.size==0: return [x]
    d=A[1]%x.ndim; m=x.max(d,keepdims=True); return [r1(x-m-np.log(np.exp(x-m).sum(d,keepdims=True)),dt)]
def ref_pool(A,dt):
    x=A[0].val().astype(D); return [AP.pool(x.astype(F),A[1],dt,"exact")]
def ref_bn(A,op,dt):
    x=A[0].val().astype(D); ns=op.endswith("no_stats")
    w=A[1].val().astype(D) if A[1] is not None else None; b=A[2].val().astype(D) if A[2] is not None else None
    train=A[3] if ns else A[5]; eps=A[5] if ns else A[7]
    ax=(0,)+tuple(range(2,x.ndim)); sh=[1,x.shape[1]]+[1]*(x.ndim-2)
    if train: m=x.mean(ax); v=x.var(ax); inv=1/np.sqrt(v+eps)
    else: m=A[3].val().astype(D); inv=1/np.sqrt(A[4].val().astype(D)+eps)
    y=(x-m.reshape(sh))*inv.reshape(sh)
    if w is not None: y=y*w.reshape(sh)
    if b is not None: y=y+b.reshape(sh)
    return [r1(y,dt)]+([r1(m,dt),r1(inv,dt)] if train else [np.zeros(0),np.zeros(0)])
def ref_ln(A,dt):
    x=A[0].val().astype(D); k=len(A[1]); ax=tuple(range(x.ndim-k,x.ndim))
    if x.size==0: return [x, x[...,:1] if False else np.zeros(A[0].sizes[:x.ndim-k]+[1]*k), np.zeros(A[0].sizes[:x.ndim-k]+[1]*k)]
    m=x.mean(ax,keepdims=True); v=x.var(ax,keepdims=True); r=1/np.sqrt(v+A[4]); y=(x-m)*r
    if A[2] is not None: y=y*A[2].val().astype(D)
    if A[3] is not None: y=y+A[3].val().astype(D)
    return [r1(y,dt),r1(m,dt),r1(r,dt)]
T={}
def tally(op,dt,emu,ref,exps):
    ref_ok = cls(ref,exps,dt)!="off"
    k=(op,dt,"ref-model agrees" if ref_ok else "ref-model differs")
    T.setdefault(k,{}); c=cls(emu,exps,dt); T[k][c]=T[k].get(c,0)+1
for r in corpus.load("aten::_log_softmax"):
    X=r["A"][0]; dt=X.dtype
    if dt not in ("bfloat16","float16"): continue
    exps=[t.val() for t in r["CPU"]]
    tally("_log_softmax",dt,[LS.emulate(X.f32(),r["A"][1],dt,16)],ref_log_softmax(r["A"],dt),exps)
for r in corpus.load("aten::_adaptive_avg_pool3d"):
    X=r["A"][0]; dt=X.dtype
    if dt not in ("bfloat16","float16"): continue
    exps=[t.val() for t in r["CPU"]]
    tally("_adaptive_avg_pool3d",dt,[AP.pool(X.f32(),r["A"][1],dt,"lowp_acc_3div")],ref_pool(r["A"],dt),exps)
for op in ("aten::_native_batch_norm_legit","aten::_native_batch_norm_legit.no_stats"):
    for r in corpus.load(op):
        X=r["A"][0]; dt=X.dtype
        if dt not in ("bfloat16","float16"): continue
        exps=[t.val() for t in r["CPU"]]
        tally(op[6:],dt,list(BN.run_call(r)),ref_bn(r["A"],op,dt),exps)
for r in corpus.load("aten::native_layer_norm"):
    X=r["A"][0]; dt=X.dtype
    if dt not in ("bfloat16","float16"): continue
    exps=[t.val() for t in r["CPU"]]
    if 0 in X.sizes: tally("native_layer_norm",dt,[np.zeros(e.shape) for e in exps],[np.zeros(e.shape) for e in exps],exps); continue
    g=lambda t: None if t is None else t.f32()
    tally("native_layer_norm",dt,list(LN.layer_norm(X.f32(),r["A"][1],g(r["A"][2]),g(r["A"][3]),r["A"][4],dt,fma_y=True)),ref_ln(r["A"],dt),exps)
for r in corpus.load("aten::sub.Scalar"):
    X=r["A"][0]; dt=X.dtype
    if dt not in ("bfloat16","float16"): continue
    exps=[t.val() for t in r["CPU"]]
    rr=lambda v: rbf(np.asarray(v,F)) if dt=="bfloat16" else np.asarray(v,F).astype(np.float16).astype(F)
    emu=[rr(X.f32()-rr(F(r["A"][1])))]
    tally("sub.Scalar",dt,emu,[r1(X.val().astype(D)-r["A"][1],dt)],exps)
for k in sorted(T): print(k, T[k])
# Every call must be reproduced bit for bit: anything else means the listed cause is not the whole story.
not_exact = [k for k in sorted(T) if set(T[k]) != {"exact"}]
print("all reproduced bit for bit" if not not_exact else f"NOT reproduced exactly: {not_exact}")
sys.exit(1 if not_exact else 0)
