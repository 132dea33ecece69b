package metrics

// someTrips is a guard's Trips with one trip kept now, two answered after
// their callers left, one given up and three requests not sent.
type someTrips struct{}

func (someTrips) TripStats() TripStats {
	return TripStats{Kept: 1, Answered: 2, GivenUp: 1, Unsent: 3}
}
