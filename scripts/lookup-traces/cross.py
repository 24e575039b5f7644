import re, sys, pickle, collections, datetime
tr = re.compile(r'GoID=(\d+) (\w+)->(\w+) Reason="([^"]*)"')
def load(p):
    evs, sync = pickle.load(open(p,'rb'))
    w=sync[1]; base=datetime.datetime.fromisoformat(w[:26]).replace(tzinfo=datetime.timezone.utc).timestamp()*1e9+int(w[26:-1] or 0)
    off=base-sync[0]
    out=[]
    for e in evs:
        if e['kind']!='StateTransition': continue
        m=tr.search(e['rest'])
        if not m: continue
        e.update(g=int(m.group(1)),a=m.group(2),b=m.group(3),r=m.group(4),w=e['T']+off)
        out.append(e)
    return out
node=load(sys.argv[1]); bench=load(sys.argv[2])
cl=[tuple(map(int,l.split())) for l in open(sys.argv[3])]
lo=max(node[0]['w'],bench[0]['w']); hi=min(node[-1]['w'],bench[-1]['w'])
sel=sorted([x for x in cl if lo<=x[0]<=hi-x[1]], key=lambda x:-x[1])[:int(sys.argv[4]) if len(sys.argv)>4 else 6]
def short(e):
    f=[x for x in e['ts'] if 'runtime.' not in x and 'internal/poll' not in x][:2]
    return f"{e['a']}->{e['b']} {e['r']} {'|'.join(f)}"
for a,d in sel:
    print(f'=== client lookup {d/1e6:.2f} ms')
    evb=[('bench',e) for e in bench if a-2e5<=e['w']<=a+d+2e5 and (e['g']==e['G'] or True)]
    evn=[('node ',e) for e in node if a<=e['w']<=a+d]
    # keep only goroutines of interest: in bench: http client ones; node: conn goroutine and the Future/mailbox
    def interesting(src,e):
        s=' '.join(e['ts']+e['st'])
        if src=='bench': return any(k in s for k in ('persistConn','bench.lookups','getFrom','Lookup'))
        return any(k in s for k in ('net/http.(*conn)','admin.','Future','processMessages','viewActor'))
    for src,e in sorted(evb+evn,key=lambda x:x[1]['w']):
        if interesting(src,e):
            print(f"  {(e['w']-a)/1e6:8.3f} {src} P={e['P']:2d} g={e['g']} {short(e)}")
