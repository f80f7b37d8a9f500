"""Emulation of torch 2.11 CPU aten::native_layer_norm for bfloat16/float16 (weight/bias same dtype or None).
layer_norm.cpp layer_norm_cpu -> cpu/layer_norm_kernel.cpp LayerNormKernelImplInternal (reduced) ->
layer_norm_kernel_mixed_type<T, T>; moments from cpu/moments_utils.h RowwiseMoments (Welford, float)."""
import sys, itertools, numpy as np
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import corpus
from corpus import rbf, rnd
F=np.float32; D=np.float64
def fma(a,b,c): return F(D(F(a))*D(F(b))+D(F(c)))
def welford(row, W, fma_w=False):
    """RowwiseMomentsImpl for N < kVecSize (=2W): scalar Welford; general N: vector chunks (not emulated)"""
    N=len(row); kVec=2*W
    assert N < kVec, "vector path not emulated"
    m0=0; m1=F(0); m2=F(0)
    for x in row:
        x=F(x); delta=F(x-m1); m0+=1
        m1=F(m1+F(delta/F(m0)))
        m2=fma(delta,F(x-m1),m2) if fma_w else F(m2+F(delta*F(x-m1)))
    # AddMoments with m0_add = 0, kAccVecSize (=W) times: no change (c = 0)
    return m1, F(m2/F(N))
def layer_norm(x, normalized_shape, w, b, eps, dt, W=16, fma_w=False, fma_y=False):
    k=len(normalized_shape); N=int(np.prod(normalized_shape)); lead=x.shape[:x.ndim-k]
    M=int(np.prod(lead)) if lead else 1
    X=x.reshape(M,N)
    Y=np.empty((M,N),F); mean=np.empty(M,F); rstd=np.empty(M,F)
    g=w.reshape(N) if w is not None else np.ones(N,F)
    bb=b.reshape(N) if b is not None else np.zeros(N,F)
    epsf=F(eps)
    for i in range(M):
        m,v=welford(X[i],W,fma_w)
        r=F(F(1)/F(np.sqrt(F(v+epsf))))
        scale=r; bias=F(-r*m)
        if fma_y:
            t=(X[i].astype(D)*D(scale)+D(bias)).astype(F); y=(t.astype(D)*g.astype(D)+bb.astype(D)).astype(F)
        else:
            t=((X[i]*scale).astype(F)+bias).astype(F); y=((t*g).astype(F)+bb).astype(F)
        Y[i]=rnd(y,dt); mean[i]=rnd(m,dt); rstd[i]=rnd(r,dt)
    stat_shape=tuple(lead)+(1,)*k
    return Y.reshape(x.shape), mean.reshape(stat_shape), rstd.reshape(stat_shape)
if __name__=="__main__":
    for fw,fy in itertools.product([False,True],[False,True]):
        tot={}
        for r in corpus.load("aten::native_layer_norm"):
            X=r["A"][0]; dt=X.dtype
            if dt not in ("bfloat16","float16"): continue
            if 0 in X.sizes:
                k=(dt,"empty"); tot[k]=tot.get(k,0)+1; continue
            g=lambda t: None if t is None else t.f32()
            got=layer_norm(X.f32(),r["A"][1],g(r["A"][2]),g(r["A"][3]),r["A"][4],dt,fma_w=fw,fma_y=fy)
            exps=[t.val().astype(D) for t in r["CPU"]]
            res=["exact" if corpus.exact(a,e) else "close" if corpus.close(a,e,dt) else "off" for a,e in zip(got,exps)]
            k=(dt,"exact" if all(x=="exact" for x in res) else "close" if "off" not in res else "off")
            tot[k]=tot.get(k,0)+1
            if k[1]!="exact" and not fw and not fy: print("  MISMATCH",X.sizes,r["A"][1],res, "torch",exps[0].ravel(),"emu",got[0].ravel())
        print("fma_welford",fw,"fma_y",fy,sorted(tot.items()))
