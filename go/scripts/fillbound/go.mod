module partita.dev/partita/scripts/fillbound

go 1.26.8

require partita.dev/partita v0.0.0

require gonum.org/v1/gonum v0.17.0

replace partita.dev/partita => ../..
