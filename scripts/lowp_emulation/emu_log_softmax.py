"""Emulation of torch 2.11 CPU aten::_log_softmax for bfloat16/float16 (half_to_float=False).
lastdim: SoftMaxKernel.cpp _vec_log_softmax_lastdim -> LogSoftmaxKernelImpl.h serial_vec_log_softmax_lastdim_range
  (max via reduce_all in float; sum of exp via map_reduce_all in float, stored in a scalar_t array (ROUNDED to bf16/fp16);
   log applied with vec::map on that scalar_t array (log in float, ROUNDED again); out = round(x - max - logsum) in float).
non-lastdim: serial_vec_logsoftmax_range (reduced specialization): all float, rounded once."""
import sys, numpy as np
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import corpus, sleef
from corpus import rbf, rnd
F=np.float32
def vreduce_seq(vals, op):
    acc=vals[0]
    for v in vals[1:]: acc=op(acc,v)
    return acc
def vec_reduce_all_full(lanes, op):
    # full-vector tree reduction used by vec_reduce_all(vec_fun, acc_vec) (size == Vec::size()):
    # AVX512/AVX2 specializations: halve repeatedly (swap halves, then pairs...). Result is lane 0 of
    # acc = op(acc, permute(acc)) for shifts n/2, n/4, ..., 1
    a=np.array(lanes,F)
    n=len(a); s=n//2
    while s>=1:
        perm=np.array([(i+s)%n if True else 0 for i in range(n)])
        # element i combines with element i^s (xor pattern for the shuffles)
        b=a[np.arange(n)^s]
        a=np.array([op(a[i],b[i]) for i in range(n)],F)
        s//=2
    return a[0]
def map_reduce_all(mapf, redf, xf, W):
    """xf: float32 array of the reduced-type data; W = fVec::size() (16 AVX512, 8 AVX2). bVec::size()=2W"""
    size=len(xf); B=2*W
    if size < B:
        pad=np.zeros(B,F); pad[:size]=xf
        f0=mapf(pad[:W]); f1=mapf(pad[W:])
        if size > W:
            f0=f0.copy()
            r=np.array([redf(f0[i],f1[i]) for i in range(W)],F)
            f0[:size-W]=r[:size-W]
            return vreduce_seq(list(f0),redf)
        else:
            return vreduce_seq(list(f0[:size]),redf)
    a0=mapf(xf[:W]); a1=mapf(xf[W:B]); d=B
    while d < size-(size%B):
        a0=np.array([redf(p,q) for p,q in zip(a0,mapf(xf[d:d+W]))],F)
        a1=np.array([redf(p,q) for p,q in zip(a1,mapf(xf[d+W:d+B]))],F)
        d+=B
    if size-d>0:
        pad=np.zeros(B,F); pad[:size-d]=xf[d:]
        f0=mapf(pad[:W]); f1=mapf(pad[W:])
        if size-d>W:
            a0=np.array([redf(p,q) for p,q in zip(a0,f0)],F)
            r=np.array([redf(p,q) for p,q in zip(a1,f1)],F); a1=a1.copy(); a1[:size-d-W]=r[:size-d-W]
        else:
            r=np.array([redf(p,q) for p,q in zip(a0,f0)],F); a0=a0.copy(); a0[:size-d]=r[:size-d]
    a0=np.array([redf(p,q) for p,q in zip(a0,a1)],F)
    return vec_reduce_all_full(a0,redf)
add=lambda a,b: F(F(a)+F(b))
def log_softmax_lastdim_row(x, dt, W, variant="torch"):
    xf=np.asarray(x,F)
    mx=F(np.max(xf))
    s=map_reduce_all(lambda v: sleef.expf_u10((v-mx).astype(F)), add, xf, W)
    if variant=="torch":
        s=rnd(s,dt)                      # tmp_sum_scalar[j] is scalar_t
        ls=rnd(np.log(np.float64(F(s))).astype(F),dt)         # vec::map(log) on the scalar_t array
    else:
        ls=F(np.log(np.float64(F(s))))
    return rnd((xf-mx).astype(F)-F(ls),dt)
def log_softmax_nonlast(x, dim, dt):
    xf=np.moveaxis(np.asarray(x,F),dim,-1)
    mx=xf.max(-1,keepdims=True)
    s=np.zeros(xf.shape[:-1],F)
    for k in range(xf.shape[-1]): s=(s+sleef.expf_u10((xf[...,k]-mx[...,0]).astype(F))).astype(F)
    out=((xf-mx).astype(F)-np.log(s.astype(np.float64)).astype(F)[...,None]).astype(F)
    return np.moveaxis(rnd(out,dt),-1,dim)
def emulate(x, dim, dt, W, variant="torch"):
    if x.ndim==0: return rnd(np.zeros((),F),dt) if not np.isnan(x) else x
    dim=dim%x.ndim
    if x.size==0: return x.copy()
    if dim==x.ndim-1:
        out=np.empty(x.shape,F); flat=x.reshape(-1,x.shape[-1]); o=out.reshape(-1,x.shape[-1])
        for i in range(flat.shape[0]): o[i]=log_softmax_lastdim_row(flat[i],dt,W,variant)
        return out
    return log_softmax_nonlast(x,dim,dt)
if __name__=="__main__":
    for W in (16,8):
      for variant in ("torch","round-once"):
        tot={}
        for r in corpus.load("aten::_log_softmax"):
            X=r["A"][0]; dt=X.dtype
            if dt not in ("bfloat16","float16"): continue
            exp=r["CPU"][0].val().astype(np.float64)
            got=emulate(X.f32(),r["A"][1],dt,W,variant)
            k=(dt,"exact" if corpus.exact(got,exp) else "close" if corpus.close(got,exp,dt) else "off")
            tot[k]=tot.get(k,0)+1
            if variant=="torch" and k[1]!="exact" and W==16:
                print("MISMATCH",r["source"],X.sizes,r["A"][1]); print(" x",X.f32().ravel()[:12]); print(" torch",exp.ravel()[:12]); print(" emu  ",got.ravel()[:12])
        print("W",W,variant,sorted(tot.items()))
