"""Sleef expf_u10 / logf_u10 (vectorized, FMA) emulated with numpy; fma(a,b,c) computed in float64 then rounded
(a*b exact in float64; the add may double-round in rare cases)."""
import numpy as np
F=np.float32; D=np.float64
def fma(a,b,c): return (D(a)*D(b)+D(c)).astype(F) if np.ndim(a) or np.ndim(b) or np.ndim(c) else F(D(a)*D(b)+D(c))
def _fma(a,b,c): return np.asarray(np.asarray(a,D)*np.asarray(b,D)+np.asarray(c,D)).astype(F)
R_LN2f=F(1.442695040888963407359924681001892137426645954152985934135449406931)
L2Uf=F(0.693145751953125); L2Lf=F(1.428606765330187045e-06)
def expf_u10(d):
    d=np.asarray(d,F)
    q=np.rint((d*R_LN2f).astype(F)).astype(np.int32)
    qf=q.astype(F)
    s=_fma(qf,-L2Uf,d); s=_fma(qf,-L2Lf,s)
    u=np.full(d.shape,F(0.000198527617612853646278381))
    for c in (0.00139304355252534151077271,0.00833336077630519866943359,0.0416664853692054748535156,0.166666671633720397949219,0.5):
        u=_fma(u,s,F(c))
    u=(F(1)+_fma((s*s).astype(F),u,s)).astype(F)
    u=np.ldexp(u.astype(D),q).astype(F)   # vldexp2: u * 2^(q>>1) * 2^(q-(q>>1)) : exact unless subnormal
    u=np.where(d< -104,F(0),u)
    u=np.where(d>100,F(np.inf),u)
    return u.astype(F)
