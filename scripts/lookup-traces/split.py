# split each client lookup in the traced window into: client before send, node (request written -> response written), client after (response written -> client read it)
import sys, pickle
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'cross.py')).read().split("node=load")[0])
node=load(sys.argv[1]); bench=load(sys.argv[2])
cl=[tuple(map(int,l.split())) for l in open(sys.argv[3])]
lo=max(node[0]['w'],bench[0]['w']); hi=min(node[-1]['w'],bench[-1]['w'])
def isw(e,name): return e['a']=='Running' and e['b']=='Syscall' and any(name in f for f in e['ts'])
bw=[e['w'] for e in bench if isw(e,'syscall.write') and any(('writeLoop' in f or 'lookupClient).roundTrip' in f) for f in e['ts']) and any('Write' in f for f in e['ts'][:3])]
br=[e['w'] for e in bench if isw(e,'syscall.read') and any('readLoop' in f for f in e['ts'])]
nw=[e['w'] for e in node if isw(e,'syscall.write') and any('net/http.(*conn)' in f or 'net/http' in f for f in e['ts']) and any('checkConnErrorWriter' in f or 'response' in f or 'bufio' in f for f in e['ts'])]
import bisect
rows=[]
for a,d in cl:
    if not (lo<=a and a+d<=hi): continue
    end=a+d
    i=bisect.bisect_left(bw,a); 
    if i>=len(bw) or bw[i]>end: continue
    w=bw[i]
    j=bisect.bisect_left(nw,w)
    if j>=len(nw) or nw[j]>end: continue
    r=nw[j]
    rows.append((d/1e6,(w-a)/1e6,(r-w)/1e6,(end-r)/1e6))
print(len(rows),'lookups: total, client before send, request written -> node wrote answer, answer written -> client done (ms)')
for k,name in enumerate(['total','client before send','node incl. its wake-up','client after answer']):
    v=sorted(x[k] for x in rows); s=sum(v)
    print(f"{name:28s} p50 {v[len(v)//2]:7.3f} p90 {v[int(len(v)*.9)]:7.3f} max {v[-1]:7.3f}  mean {s/len(v):.3f}")
rows.sort(reverse=True)
print('slowest 5:', [tuple(round(x,2) for x in r) for r in rows[:5]])
