package core

import "time"

// Admit decides whether device may come online for the view's user with at
// most limit devices online at once (config.Limits.Devices), before its
// handshake takes the lease. A device that is online (a reconnect, which
// supersedes its old connection) or admitted already is always let in; a
// new one only while the devices online plus those admitted and not yet up
// are fewer than limit. An admitted device holds its place until its
// DeviceUp arrives or until hold, whichever is first, so that concurrent
// handshakes of new devices cannot together go past the limit; a handshake
// that fails after its admission frees its place at hold.
//
// It returns whether device is let in and the count it was judged on
// (online plus admitted, device included when let in).
func (v *View) Admit(device string, limit int, now, hold time.Time) (bool, int) {
	v.Admitting(now)
	n := v.Devices.Len() + len(v.admitted)
	if v.Devices.Has(device) {
		return true, n
	}
	if _, ok := v.admitted[device]; ok {
		v.admitted[device] = hold
		return true, n
	}
	if n >= limit {
		return false, n
	}
	if v.admitted == nil {
		v.admitted = map[string]time.Time{}
	}
	v.admitted[device] = hold
	return true, n + 1
}

// Admitting says whether a device admitted and not up yet still holds its
// place at now; it forgets the admissions that came up or ran out. A view
// holding one must not passivate: it would forget the place, and let in
// a device past the limit before the admitted one comes up.
func (v *View) Admitting(now time.Time) bool {
	for d, until := range v.admitted {
		if v.Devices.Has(d) || !now.Before(until) {
			v.unadmit(d)
		}
	}
	return len(v.admitted) > 0
}

// Withdraw frees the place of a device admitted for a handshake that
// failed before the device came up.
func (v *View) Withdraw(device string) { v.unadmit(device) }

// unadmit ends device's admission (its DeviceUp arrived, its hold ran out
// or its handshake failed). The map goes with its last entry, as a map
// keeps its buckets after a delete: a view whose devices are all up holds
// no admission map.
func (v *View) unadmit(device string) {
	delete(v.admitted, device)
	if len(v.admitted) == 0 {
		v.admitted = nil
	}
}
