package pkg

type B struct{}

func (B) make() A { return newA() }
