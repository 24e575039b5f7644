package cluster

// Single is the membership of a node that runs alone: itself, alive since
// it started.
type Single struct{ Member Member }

func (s Single) Self() Member      { return s.Member }
func (s Single) Members() []Member { return []Member{s.Member} }
