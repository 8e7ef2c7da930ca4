#!/usr/bin/env python3
# Lane-by-lane simulation of lib/backend/cuda/paged_attention.cu (paged_attention_kernel and the
# split combine), ported by hand: lane groups, the shuffle reductions, each lane group's online
# softmax, the merges across lane groups, warps and splits, against plain attention in f64.
# Checks the index arithmetic on a machine without a GPU (numpy; ~1 min), not the CUDA code.
import numpy as np, math
kWarps=4
def kernel(q, K, V, table, bs, ctx, n_heads, n_kv, hd, G, LPK, VEC, NC, U, split_keys, splits):
    group=n_heads//n_kv; chunks=group//G; KPW=32//LPK
    out=np.full((n_heads,hd),np.nan); parts={}
    for by in range(n_kv*chunks):
      for z in range(splits):
        begin=z*split_keys
        if ctx<=0 or begin>=ctx: continue
        end=min(ctx,begin+split_keys)
        kvh=by//chunks; h0=kvh*group+(by%chunks)*G
        scale=1/math.sqrt(hd)*1.4426950408889634
        # per thread state
        st={}
        for w in range(kWarps):
          for lane in range(32):
            kslot=lane//LPK; c=lane%LPK
            has=[(c+LPK*i)*VEC<hd for i in range(NC)]
            dims=[[(c+LPK*i)*VEC+e for e in range(VEC)] for i in range(NC)]
            qf=np.zeros((G,NC,VEC))
            for g in range(G):
              for i in range(NC):
                for e in range(VEC):
                  if has[i]: qf[g,i,e]=q[h0+g,dims[i][e]]*scale
            st[(w,lane)]=dict(kslot=kslot,c=c,has=has,dims=dims,qf=qf,acc=np.zeros((G,NC,VEC)),m=[-math.inf]*G,l=[0.0]*G)
        t0=begin
        while t0<end:
          for w in range(kWarps):
            loads={}
            for lane in range(32):
              s=st[(w,lane)]
              kc=np.zeros((U,NC,VEC)); vc=np.zeros((U,NC,VEC)); live=[]
              for u in range(U):
                j=t0+(u*kWarps+w)*KPW+s['kslot']; lv=j<end; live.append(lv)
                if lv:
                  slot=table[j//bs]*bs+j%bs
                  for i in range(NC):
                    if s['has'][i]:
                      for e in range(VEC):
                        kc[u,i,e]=K[slot,kvh*hd+s['dims'][i][e]]; vc[u,i,e]=V[slot,kvh*hd+s['dims'][i][e]]
              loads[lane]=(kc,vc,live)
            for g in range(G):
              # partial dots then shuffle-xor reduce within LPK
              x={(u,lane):float(np.sum(st[(w,lane)]['qf'][g]*loads[lane][0][u])) for u in range(U) for lane in range(32)}
              o=LPK//2
              while o>0:
                x={(u,lane):x[(u,lane)]+x[(u,lane^o)] for (u,lane) in x}; o//=2
              for lane in range(32):
                s=st[(w,lane)]; kc,vc,live=loads[lane]
                sc=[x[(u,lane)] if live[u] else -math.inf for u in range(U)]
                mx=max(sc)
                if mx==-math.inf: continue
                mn=max(s['m'][g],mx); corr=0.0 if s['m'][g]==-math.inf else 2**(s['m'][g]-mn)
                s['l'][g]*=corr; s['acc'][g]*=corr
                for u in range(U):
                  p=2**(sc[u]-mn) if live[u] else 0.0
                  s['l'][g]+=p; s['acc'][g]+=p*vc[u]
                s['m'][g]=mn
          t0+=kWarps*KPW*U
        # merge within warp
        for w in range(kWarps):
          o=LPK
          while o<32:
            new={}
            for lane in range(32):
              a=st[(w,lane)]; b=st[(w,lane^o)]
              m=[];l=[];acc=np.zeros_like(a['acc'])
              for g in range(G):
                mn=max(a['m'][g],b['m'][g])
                wa=0.0 if a['m'][g]==-math.inf else 2**(a['m'][g]-mn); wb=0.0 if b['m'][g]==-math.inf else 2**(b['m'][g]-mn)
                m.append(mn); l.append(a['l'][g]*wa+b['l'][g]*wb); acc[g]=a['acc'][g]*wa+b['acc'][g]*wb
              new[lane]=(m,l,acc)
            for lane in range(32):
              st[(w,lane)]['m'],st[(w,lane)]['l'],st[(w,lane)]['acc']=new[lane]
            o<<=1
        o_s=np.full((kWarps,G,hd),np.nan); m_s=np.zeros((kWarps,G)); l_s=np.zeros((kWarps,G))
        for w in range(kWarps):
          for lane in range(32):
            s=st[(w,lane)]
            if s['kslot']==0:
              for g in range(G):
                if s['c']==0: m_s[w,g]=s['m'][g]; l_s[w,g]=s['l'][g]
                for i in range(NC):
                  if s['has'][i]:
                    for e in range(VEC): o_s[w,g,s['dims'][i][e]]=s['acc'][g,i,e]
        for g in range(G):
          for e in range(hd):
            mx=max(m_s[:,g]); 
            wts=[0.0 if m_s[w,g]==-math.inf else 2**(m_s[w,g]-mx) for w in range(kWarps)]
            o=sum(o_s[w,g,e]*wts[w] for w in range(kWarps)); sm=sum(l_s[w,g]*wts[w] for w in range(kWarps))
            if splits==1: out[h0+g,e]=o/sm
            else:
              d=parts.setdefault(h0+g,{}).setdefault(z,[mx,sm,np.zeros(hd)]); d[2][e]=o
    if splits>1:
      for h,pz in parts.items():
        mx=max(v[0] for v in pz.values()); tot=sum(v[1]*2**(v[0]-mx) for v in pz.values())
        out[h]=sum(v[2]*2**(v[0]-mx)/tot for v in pz.values())
    return out
def ref(q,K,V,table,bs,ctx,n_heads,n_kv,hd):
    group=n_heads//n_kv; out=np.zeros((n_heads,hd))
    slots=[table[j//bs]*bs+j%bs for j in range(ctx)]
    for h in range(n_heads):
      kvh=h//group; k=K[slots,kvh*hd:(kvh+1)*hd]; v=V[slots,kvh*hd:(kvh+1)*hd]
      s=k@q[h]/math.sqrt(hd); p=np.exp(s-s.max()); out[h]=p@v/p.sum()
    return out
rng=np.random.default_rng(0)
for (n_heads,n_kv,hd,VEC,ctx,split_keys) in [(8,2,64,8,100,1000),(8,2,64,8,300,128),(4,4,32,4,37,64),(6,1,160,8,70,1000),(6,1,160,4,200,64),(4,2,16,4,9,64),(4,1,20,1,50,64),(16,8,128,8,130,64)]:
    group=n_heads//n_kv; G=8 if group%8==0 else 4 if group%4==0 else 2 if group%2==0 else 1
    if VEC==1: LPK,NC=32,8
    else:
      ch=hd//VEC; NC=1
      LPK=4 if ch<=4 else 8 if ch<=8 else 16 if ch<=16 else 32
      if ch>32 and VEC!=8: NC=2
    U=1 if NC>1 else (2 if G>4 or (G>2 and VEC<8) else 4)
    bs=16; nblocks=(ctx+bs-1)//bs; table=rng.permutation(nblocks+5)[:nblocks]
    row=n_kv*hd; K=rng.standard_normal(((nblocks+5)*bs,row)); V=rng.standard_normal(((nblocks+5)*bs,row))
    q=rng.standard_normal((n_heads,hd))
    splits=(ctx+split_keys-1)//split_keys
    o=kernel(q,K,V,table,bs,ctx,n_heads,n_kv,hd,G,LPK,VEC,NC,U,split_keys,splits); r=ref(q,K,V,table,bs,ctx,n_heads,n_kv,hd)
    print(n_heads,n_kv,hd,'VEC',VEC,'LPK',LPK,'NC',NC,'U',U,'G',G,'ctx',ctx,'splits',splits,'nmse',np.sum((o-r)**2)/np.sum(r**2))
