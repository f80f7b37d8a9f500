"""Emulation of torch 2.11 CPU aten::_native_batch_norm_legit (and .no_stats) for bfloat16/float16 inputs with
bfloat16/float16 weight/bias/running stats (not mixed-type), contiguous input.
Normalization.cpp batch_norm_cpu -> batch_norm_cpu_out -> (train) batch_norm_cpu_update_stats_template<scalar_t, scalar_t, InvStd>
   + batch_norm_cpu_transform_input_template<scalar_t, scalar_t>; kernels in cpu/batch_norm_kernel.cpp."""
import sys, itertools, numpy as np
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import corpus
from corpus import rbf, rnd
F=np.float32; D=np.float64
def fma32(a,b,c): return F(D(F(a))*D(F(b))+D(F(c)))
def batch_norm(x, w, b, rm, rv, train, momentum, eps, dt, W=16, fma_var=False, fma_out=False, stats_in_float=None, fma_beta=False):
    if stats_in_float is None: stats_in_float = (dt=='float16')   # PR #126525: Half -> float _mean/_var_sum buffers
    """x float32 array of low-precision values (N,C,*). returns (out, save_mean, save_invstd) as float32 arrays"""
    N_b, C = x.shape[0], x.shape[1]
    img = int(np.prod(x.shape[2:])) if x.ndim>2 else 1
    xr = x.reshape(N_b, C, img)
    N = N_b*img
    B = 2*W  # bVec::size()
    if train:
        smean=np.empty(C,F); sinv=np.empty(C,F)
        for c in range(C):
            # batch_norm_cpu_collect_stats_contiguous_internal<scalar_t, scalar_t>
            s=F(0); svec=np.zeros(W,F)
            for n in range(N_b):
                row=xr[n,c]; d=0
                while d < img-(img%B):
                    blk=row[d:d+B]; svec=(svec+blk[:W]).astype(F); svec=(svec+blk[W:]).astype(F); d+=B
                for k in range(d,img): s=F(s+row[k])
            # sum_val += vec_reduce_all(+, sum_fvec, fVec::size())  (only matters when img>=B)
            if img>=B:
                acc=svec[0]
                for v in svec[1:]: acc=F(acc+v)
                s=F(s+acc)
            mean_val=F(s/F(N))
            mean_p=rnd(mean_val,dt)                       # mean_data[c] = param_t(mean_val)
            v=F(0)
            # image_size == 1 ("NC11 is also channels last"): batch_norm_cpu_collect_stats_channels_last_internal
            # reads the mean back from mean_data (param_t): bf16 -> rounded mean; fp16 (float buffers) -> float mean
            mean_for_var = mean_p if (img==1 and not stats_in_float) else mean_val
            for n in range(N_b):
                for k in range(img):
                    dd=F(xr[n,c,k]-mean_for_var)
                    v = fma32(dd,dd,v) if fma_var else F(v+F(dd*dd))
            if stats_in_float:
                # _mean/_var_sum buffers hold float: var_sum/n computed in float
                var_n=F(v/F(N))
            else:
                var_sum_p=rnd(v,dt)                           # var_sum_data[c] = param_t(var_val)
                var_n=rnd(F(var_sum_p)/F(rnd(F(N),dt)),dt)    # BFloat16/Half operator/(T, int64_t): rounded to T
            if var_n!=0 or eps!=0:
                inv=F(1.0/np.sqrt(D(var_n)+eps))          # float var + double eps -> double sqrt/div -> float
            else: inv=F(0)
            smean[c]=mean_p; sinv[c]=rnd(inv,dt)          # stored into param_t save tensors
        mean_use, inv_use = smean, sinv
    else:
        mean_use = rm.astype(F)
        inv_use = np.array([F(F(1)/np.sqrt(F(F(v)+F(eps)))) for v in rv],F)   # 1/std::sqrt(running_var + (float)eps), float
        smean=np.zeros(0,F); sinv=np.zeros(0,F)
    out=np.empty_like(xr)
    for c in range(C):
        wv = F(w[c]) if w is not None else F(1)
        bv = F(b[c]) if b is not None else F(0)
        alpha=F(inv_use[c]*wv)
        beta=F(D(bv) - D(mean_use[c])*D(alpha)) if fma_beta else F(bv - F(mean_use[c]*alpha))
        for n in range(N_b):
            row=xr[n,c]
            if fma_out: o=(row.astype(D)*D(alpha)+D(beta)).astype(F)
            else: o=(F(1)*(row*alpha).astype(F)+beta).astype(F)
            out[n,c]=rnd(o,dt)
    return out.reshape(x.shape), smean, sinv
def run_call(r, **kw):
    A=r["A"]; op=r["op"]
    X=A[0]; dt=X.dtype
    g=lambda t: None if t is None or t=="DEFAULT" else t.f32()
    if op.endswith("no_stats"):
        x,w,b,train,mom,eps=X.f32(),g(A[1]),g(A[2]),A[3],A[4],A[5]; rm=rv=None
    else:
        x,w,b,rm,rv,train,mom,eps=X.f32(),g(A[1]),g(A[2]),g(A[3]),g(A[4]),A[5],A[6],A[7]
    return batch_norm(x,w,b,rm,rv,train,mom,eps,dt,**kw)
if __name__=="__main__":
    for fv,fo,fb,sf in itertools.product([False,True],[False,True],[False,True],[None,True,False]):
        tot={}
        for op in ("aten::_native_batch_norm_legit","aten::_native_batch_norm_legit.no_stats"):
            for r in corpus.load(op):
                dt=r["A"][0].dtype
                if dt not in ("bfloat16","float16"): continue
                got=run_call(r,fma_var=fv,fma_out=fo,fma_beta=fb,stats_in_float=sf)
                exps=[t.val().astype(D) for t in r["CPU"]]
                res=[]
                for gi,ei in zip(got,exps):
                    res.append("exact" if corpus.exact(gi,ei) else "close" if corpus.close(gi,ei,dt) else "off")
                k=(dt,"exact" if all(x=="exact" for x in res) else "close" if all(x!="off" for x in res) else "off")
                tot[k]=tot.get(k,0)+1
                if k[1]!="exact" and not fv and not fo and sf is None:
                    print("  MISMATCH",op,dt,r["A"][0].sizes,"train",r["A"][5] if not op.endswith("no_stats") else r["A"][3],res)
        print("fma_var",fv,"fma_out",fo,"fma_beta",fb,"stats_in_float",{None:"Half only (2.11)",True:"both",False:"neither"}[sf],sorted(tot.items()))
