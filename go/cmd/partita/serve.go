package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"partita.dev/partita/internal/accounting"
	"partita.dev/partita/internal/portal"
	"partita.dev/partita/internal/scenario"
	"partita.dev/partita/internal/server"
	"partita.dev/partita/internal/standalone"
	"partita.dev/partita/internal/store"
)

func init() {
	register("serve", "the standalone server: HTTP API, SQLite store and a virtual GPU cluster", runServe)
}

type serveFlags struct {
	dataDir, listen, clusterFile, pricesFile string
	speed                                    float64
	seed                                     int64
}

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	fs.StringVar(&f.dataDir, "data-dir", "./partita-data", "where the SQLite store and admin.token live")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to listen on (port 0: any free port)")
	fs.StringVar(&f.clusterFile, "cluster", "", "scenario file whose nodes and teams make the virtual cluster (default: the built-in demo, scenarios/demo.yaml)")
	fs.Float64Var(&f.speed, "speed", 60, "cluster seconds per wall second on the virtual cluster")
	fs.StringVar(&f.pricesFile, "prices", "", "price table (JSON, as GET /api/v1/prices shows it; default: the built-in table)")
	fs.Int64Var(&f.seed, "seed", 1, "the scheduler's random seed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !(f.speed > 0 && f.speed <= 1e6) {
		fmt.Fprintf(stderr, "serve: --speed %v must be above 0 and at most 1000000\n", f.speed)
		return 2
	}
	if os.Getenv("GOGC") == "" {
		// The server's heap is small (tens of MB) and its CPU is what
		// bounds submissions per second: collect less often.
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMAXPROCS") == "" {
		// One P more than the CPUs: the world's loop holds one while a
		// long cycle runs on its lower-priority thread, and the API and
		// the store's writer must still have one per CPU.
		runtime.GOMAXPROCS(runtime.NumCPU() + 1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, f, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "serve:", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, f serveFlags, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	sc, err := loadCluster(f.clusterFile)
	if err != nil {
		return err
	}
	prices := accounting.DefaultPrices()
	if f.pricesFile != "" {
		if prices, err = accounting.LoadPrices(f.pricesFile); err != nil {
			return err
		}
	}
	st, err := store.Open(f.dataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	teams, projects := server.ScenarioTeams(sc)
	secret, err := server.Bootstrap(ctx, st, f.dataDir, teams, projects)
	if err != nil {
		return fmt.Errorf("first start: %w", err)
	}
	if secret != "" {
		fmt.Fprintf(stdout, "First start: created user admin. Its token is shown once here and kept in %s (mode 0600):\n\n  %s\n\n",
			filepath.Join(f.dataDir, server.TokenFile), secret)
	}
	metrics := server.NewMetrics()
	world, err := standalone.New(ctx, st, standalone.Options{Scenario: sc, Speed: f.speed, Seed: f.seed, Log: log, Observer: metrics, Niced: true})
	if err != nil {
		return err
	}
	srv, err := server.New(ctx, server.Config{Store: st, World: world, Prices: prices, Log: log}, metrics)
	if err != nil {
		return err
	}
	web, err := portal.New(portal.Config{API: srv.Handler(), World: world, Store: st, Log: log})
	if err != nil {
		return err
	}
	go web.Run(ctx)
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	if addr := os.Getenv("PARTITA_PPROF"); addr != "" {
		// Profiling on a separate listener, for measuring the server
		// under load; never on the API's.
		go func() { log.Info("pprof", "err", http.ListenAndServe(addr, pprofMux())) }()
	}
	fmt.Fprintf(stdout, "Partita listening on http://%s (the portal at /; virtual cluster %s: %d GPUs at %gx; data in %s)\n", ln.Addr(), sc.Name, world.GPUs(), f.speed, f.dataDir)
	return run(ctx, ln, web.Handler(), world, log)
}

func pprofMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return m
}

// run serves until ctx ends, then drains requests and stops the world.
func run(ctx context.Context, ln net.Listener, h http.Handler, world *standalone.World, log *slog.Logger) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute}
	worldCtx, stopWorld := context.WithCancel(context.Background())
	worldDone := make(chan struct{})
	go func() {
		defer close(worldDone)
		_ = world.Run(worldCtx)
	}()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutCtx)
	stopWorld()
	<-worldDone
	log.Info("stopped")
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func loadCluster(path string) (*scenario.Scenario, error) {
	if path == "" {
		return scenario.Parse(bytes.NewReader(standalone.DemoYAML), "demo.yaml")
	}
	return scenario.Load(path)
}
