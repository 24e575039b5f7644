# parse `go tool trace -d=parsed` output into transitions
import re, sys, collections, pickle
hdr = re.compile(r'^M=(-?\d+) P=(-?\d+) G=(-?\d+) (\w+) Time=(\d+)(.*)$')
def parse(path):
    evs = []; cur = None; mode = None
    sync = None
    for line in open(path):
        m = hdr.match(line)
        if m:
            M,P,G,kind,T,rest = m.groups()
            cur = dict(M=int(M),P=int(P),G=int(G),kind=kind,T=int(T),rest=rest,ts=[],st=[])
            evs.append(cur); mode=None
            if kind=='Sync' and sync is None:
                mm = re.search(r'Mono=(\d+) Wall=(\S+)', rest)
                sync=(int(T), mm.group(2))
            continue
        if line.startswith('TransitionStack='): mode='ts'; continue
        if line.startswith('Stack='): mode='st'; continue
        if line.startswith('\t') and cur is not None and mode and not line.startswith('\t\t'):
            cur[mode].append(line.strip().split(' @ ')[0])
    return evs, sync
if __name__=='__main__':
    evs, sync = parse(sys.argv[1])
    pickle.dump((evs,sync), open(sys.argv[2],'wb'))
    print(len(evs), sync)
