import re, sys, pickle, collections, statistics
evs, sync = pickle.load(open(sys.argv[1],'rb'))
tr = re.compile(r'GoID=(\d+) (\w+)->(\w+) Reason="([^"]*)"')
by = collections.defaultdict(list)
for e in evs:
    if e['kind']!='StateTransition': continue
    m = tr.search(e['rest'])
    if not m: continue
    g,a,b,r = int(m.group(1)),m.group(2),m.group(3),m.group(4)
    e.update(g=g,a=a,b=b,r=r)
    by[g].append(e)
def has(e, s): return any(s in f for f in e['ts']+e['st'])
conns = [g for g,l in by.items() if any(has(e,'net/http.(*conn).serve') for e in l) and any(has(e,'admin.(*Server).presence') or has(e, 'conn).Read') for e in l)]
print('lookup conn goroutines', conns)
rows=[]
T0 = evs[0]['T']
for g in conns:
    l = by[g]
    i=0
    # a request: Waiting->Runnable after a read wait ... until the next Running->Waiting in a read
    start=None
    for k,e in enumerate(l):
        if e['a']=='Waiting' and e['b']=='Runnable' and k>0 and has(l[k-1],'netpoll') or (e['a']=='Waiting' and e['b']=='Runnable' and k>0 and has(l[k-1],'conn).Read') ):
            start=k
        if e['a']=='Running' and e['b']=='Waiting' and start is not None and (has(e,'netpoll') or has(e,'Read')) and k>start+1:
            seg=l[start:k+1]
            # phases
            ready=seg[0]['T']; run1=None; fut=None; fready=None; run2=None; end=e['T']
            runq=0; last=None; preempt=0
            for x in seg:
                if x['b']=='Runnable': last=x['T']
                if x['a']=='Runnable' and x['b']=='Running': runq += x['T']-last
                if x['a']=='Running' and x['b']=='Runnable': preempt+=1
                if x['a']=='Runnable' and x['b']=='Running' and run1 is None: run1=x['T']
                if x['a']=='Running' and x['b']=='Waiting' and has(x,'Future'): fut=x['T']
                if fut and x['a']=='Waiting' and x['b']=='Runnable' and fready is None: fready=x['T']; wakerG=x['G']
                if fready and x['a']=='Runnable' and x['b']=='Running' and run2 is None: run2=x['T']
            if fut is None:
                fut=fready=run2=run1
            rows.append(dict(g=g,t=(ready-T0)/1e6,total=(end-ready)/1e6,firstwait=(run1-ready)/1e6,
                toFuture=(fut-run1)/1e6, actor=(fready-fut)/1e6, wake2=(run2-fready)/1e6, after=(end-run2)/1e6, runq=runq/1e6, preempt=preempt))
            start=None
print(len(rows),'lookups in the node trace')
rows.sort(key=lambda r:-r['total'])
keys=['total','firstwait','toFuture','actor','wake2','after','runq']
for k in keys:
    v=sorted(r[k] for r in rows)
    print(f"{k:10s} p50 {v[len(v)//2]:8.3f} p90 {v[int(len(v)*.9)]:8.3f} max {v[-1]:8.3f} ms  sum {sum(v):8.1f}")
print('slowest:')
for r in rows[:8]: print({k:(round(v,3) if isinstance(v,float) else v) for k,v in r.items()})
# match the client's lookups (wall clock) with the node's
import datetime
if len(sys.argv)>2:
    w = sync[1]; 
    base = datetime.datetime.fromisoformat(w[:26]).replace(tzinfo=datetime.timezone.utc).timestamp()*1e9 + int(w[26:-1] or 0)
    off = base - sync[0]   # wall ns = T + off
    cl = [tuple(map(int,l.split())) for l in open(sys.argv[2])]
    tmin, tmax = evs[0]['T']+off, evs[-1]['T']+off
    inwin = [(a,d) for a,d in cl if tmin<=a<=tmax]
    srv = sorted(((r['t']*1e6+T0+off), r['total']) for r in rows)
    out=[]
    for a,d in inwin:
        # the server lookup starting after a, closest
        c = [s for s in srv if s[0]>=a-1e6 and s[0] <= a+d]
        out.append((d/1e6, c[0][1] if c else None, (c[0][0]-a)/1e6 if c else None))
    out.sort(reverse=True)
    print(len(inwin),'client lookups in the window; slowest: client ms, server ms, request reached server after ms')
    for o in out[:12]: print(o)
    v=sorted(o[0] for o in out); print('client p50 %.2f p90 %.2f max %.2f'%(v[len(v)//2], v[int(len(v)*.9)], v[-1]))
