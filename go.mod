module partita.dev/partita

go 1.26.8
