"""Emulation candidates for torch 2.11 CPU aten::_adaptive_avg_pool3d (contiguous) for bfloat16/float16."""
import sys, math, numpy as np
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import corpus
from corpus import rbf, rnd
F=np.float32; D=np.float64
def start_index(a,b,c): return (a*c)//b
def end_index(a,b,c): return -((-(a+1)*c)//b)
def pool(x, osz, dt, variant):
    *lead,ID,IH,IW=x.shape; OD,OH,OW=osz
    xc=x.reshape(-1,ID,IH,IW); out=np.empty((xc.shape[0],OD,OH,OW),F)
    for c in range(xc.shape[0]):
        for od in range(OD):
            d0,d1=start_index(od,OD,ID),end_index(od,OD,ID)
            for oh in range(OH):
                h0,h1=start_index(oh,OH,IH),end_index(oh,OH,IH)
                for ow in range(OW):
                    w0,w1=start_index(ow,OW,IW),end_index(ow,OW,IW)
                    vals=xc[c,d0:d1,h0:h1,w0:w1].ravel()
                    kd,kh,kw=d1-d0,h1-h0,w1-w0
                    if variant=="float_acc_3div":      # cpu_adaptive_avg_pool3d<scalar_t, float>
                        s=F(0)
                        for v in vals: s=F(s+F(v))
                        r=F(F(F(s/F(kd))/F(kh))/F(kw)); out[c,od,oh,ow]=rnd(r,dt)
                    elif variant=="lowp_acc_3div":     # legacy adaptive_avg_pool3d_out_frame<scalar_t>: scalar_t sum, scalar_t divisions
                        s=rnd(0,dt)
                        for v in vals: s=rnd(F(s)+F(v),dt)
                        r=rnd(F(s)/F(kd),dt); r=rnd(F(r)/F(kh),dt); r=rnd(F(r)/F(kw),dt); out[c,od,oh,ow]=r
                    elif variant=="float_acc_1div":
                        s=F(0)
                        for v in vals: s=F(s+F(v))
                        out[c,od,oh,ow]=rnd(F(s/F(kd*kh*kw)),dt)
                    elif variant=="exact":
                        out[c,od,oh,ow]=rnd(D(vals.astype(D).sum())/(kd*kh*kw),dt)
    return out.reshape(*lead,OD,OH,OW)
VARIANTS=["float_acc_3div","lowp_acc_3div","float_acc_1div","exact"]
if __name__=="__main__":
    for variant in VARIANTS:
        tot={}
        for r in corpus.load("aten::_adaptive_avg_pool3d"):
            X=r["A"][0]; dt=X.dtype
            if dt not in ("bfloat16","float16") or 0 in X.sizes: continue
            exp=r["CPU"][0].val().astype(np.float64)
            got=pool(X.f32(),r["A"][1],dt,variant)
            k=(dt,"exact" if corpus.exact(got,exp) else "close" if corpus.close(got,exp,dt) else "off")
            tot[k]=tot.get(k,0)+1
        print(variant,sorted(tot.items()))
