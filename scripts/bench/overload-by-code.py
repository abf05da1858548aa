import json,base64,collections
g=collections.defaultdict(list)
for l in open('/tmp/why/a.json'):
    r=json.loads(l); b=base64.b64decode(r.get('body') or b'').decode('utf8','replace')
    key=str(r['code'])
    if r['code']!=200:
        try:
            j=json.loads(b); e=j.get('error') if isinstance(j,dict) else None
            key+=' '+(json.dumps(e)[:90] if e else b[:90])
        except Exception: key+=' '+b[:90]
    g[key].append(r['latency']/1e6)
def q(v,p): v=sorted(v); return v[min(len(v)-1,int(p*len(v)))]
import re
agg=collections.defaultdict(list)
for k,v in g.items():
    k2=k[:4]+re.sub(r'\d+(\.\d+)?','N',k[4:])
    agg[k2]+=v
for k,v in sorted(agg.items(),key=lambda kv:-len(kv[1])):
    print(f"{len(v):6d} p50 {q(v,.5):8.1f} p99 {q(v,.99):8.1f}  {k}")
