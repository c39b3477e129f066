package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

type etcdFlags struct {
	name, dataDir                                string
	listenClient, advertiseClient                []string
	listenPeer, advertisePeer                    []string
	initialCluster, initialClusterState          string
	certFile, keyFile, trustedCAFile             string
	peerCertFile, peerKeyFile, peerTrustedCAFile string
	logLevel, logFormat                          string
	quotaBackendBytes                            int64
}

func newEtcdCmd() *cobra.Command {
	var f etcdFlags
	var cmd = &cobra.Command{
		Use:   "etcd",
		Short: "Run an etcd 3.6 server, a member of a cluster, until interrupted",
		Long: `etcd runs one etcd server (v3.6, the version Gazette's brokers and
gazconsumer's members are built with) in the foreground, as a process of its
own: a member of a cluster of one or more, on the addresses and with the TLS
its flags name. Its flags are etcd's own.

Gazette's brokers need etcd 3.5 or later; distributions often package older
ones. Use it where no etcd cluster is at hand; a production deployment runs
etcd as its operators run it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEtcd(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	var fl = cmd.Flags()
	fl.StringVar(&f.name, "name", "default", "human-readable name of this member")
	fl.StringVar(&f.dataDir, "data-dir", "", "path to the data directory (required)")
	fl.StringSliceVar(&f.listenClient, "listen-client-urls", []string{"http://127.0.0.1:2379"}, "URLs to listen on for client traffic")
	fl.StringSliceVar(&f.advertiseClient, "advertise-client-urls", nil, "client URLs of this member advertised to the cluster (default: the listen URLs)")
	fl.StringSliceVar(&f.listenPeer, "listen-peer-urls", []string{"http://127.0.0.1:2380"}, "URLs to listen on for peer traffic")
	fl.StringSliceVar(&f.advertisePeer, "initial-advertise-peer-urls", nil, "peer URLs of this member advertised to the cluster (default: the listen URLs)")
	fl.StringVar(&f.initialCluster, "initial-cluster", "", "initial cluster configuration for bootstrapping, name=peer-URL,... (default: this member alone)")
	fl.StringVar(&f.initialClusterState, "initial-cluster-state", "new", "initial cluster state: new or existing")
	fl.StringVar(&f.certFile, "cert-file", "", "path to the client server TLS certificate")
	fl.StringVar(&f.keyFile, "key-file", "", "path to the client server TLS key")
	fl.StringVar(&f.trustedCAFile, "trusted-ca-file", "", "path to the CA of client certificates: if set, clients must present one it signed")
	fl.StringVar(&f.peerCertFile, "peer-cert-file", "", "path to the peer server TLS certificate")
	fl.StringVar(&f.peerKeyFile, "peer-key-file", "", "path to the peer server TLS key")
	fl.StringVar(&f.peerTrustedCAFile, "peer-trusted-ca-file", "", "path to the CA of peer certificates: if set, peers must present one it signed")
	fl.Int64Var(&f.quotaBackendBytes, "quota-backend-bytes", 0, "raise alarms when the backend size exceeds this quota (0: etcd's default)")
	fl.StringVar(&f.logLevel, "log-level", "warn", "etcd's log level: debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", envOr("LOG_FORMAT", "json"), "etcd's log format: json, or text (color and etcd's console are synonyms) (env LOG_FORMAT)")
	return cmd
}

func runEtcd(ctx context.Context, out io.Writer, f etcdFlags) error {
	if f.dataDir == "" {
		return fmt.Errorf("--data-dir is required")
	}
	var parse = func(flag string, raw []string) ([]url.URL, error) {
		var urls []url.URL
		for _, r := range raw {
			var u, err = url.Parse(strings.TrimSpace(r))
			if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				return nil, fmt.Errorf("--%s: %q is not an http:// or https:// URL", flag, r)
			}
			urls = append(urls, *u)
		}
		return urls, nil
	}
	var cfg = embed.NewConfig()
	cfg.Name, cfg.Dir = f.name, f.dataDir
	var err error
	if cfg.ListenClientUrls, err = parse("listen-client-urls", f.listenClient); err != nil {
		return err
	}
	if cfg.AdvertiseClientUrls, err = parse("advertise-client-urls", orDefault(f.advertiseClient, f.listenClient)); err != nil {
		return err
	}
	if cfg.ListenPeerUrls, err = parse("listen-peer-urls", f.listenPeer); err != nil {
		return err
	}
	if cfg.AdvertisePeerUrls, err = parse("initial-advertise-peer-urls", orDefault(f.advertisePeer, f.listenPeer)); err != nil {
		return err
	}
	cfg.InitialCluster = f.initialCluster
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	}
	switch f.initialClusterState {
	case embed.ClusterStateFlagNew, embed.ClusterStateFlagExisting:
		cfg.ClusterState = f.initialClusterState
	default:
		return fmt.Errorf("--initial-cluster-state: %q is not %q or %q", f.initialClusterState, embed.ClusterStateFlagNew, embed.ClusterStateFlagExisting)
	}
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: f.certFile, KeyFile: f.keyFile, TrustedCAFile: f.trustedCAFile, ClientCertAuth: f.trustedCAFile != ""}
	cfg.PeerTLSInfo = transport.TLSInfo{CertFile: f.peerCertFile, KeyFile: f.peerKeyFile, TrustedCAFile: f.peerTrustedCAFile, ClientCertAuth: f.peerTrustedCAFile != ""}
	if f.quotaBackendBytes != 0 {
		cfg.QuotaBackendBytes = f.quotaBackendBytes
	}
	switch f.logLevel {
	case "debug", "info", "warn", "error":
		cfg.LogLevel = f.logLevel
	default:
		return fmt.Errorf("--log-level: %q is not debug, info, warn or error", f.logLevel)
	}
	switch f.logFormat {
	case "json", "":
		cfg.LogFormat = "json"
	case "text", "color", "console":
		cfg.LogFormat = "console"
	default:
		return fmt.Errorf("--log-format (env LOG_FORMAT): %q is not json, text, color or console", f.logFormat)
	}
	if err = cfg.Validate(); err != nil {
		return fmt.Errorf("etcd configuration: %w", err)
	}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("starting etcd in %s: %w", cfg.Dir, err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err = <-e.Err():
		return fmt.Errorf("etcd failed to start: %w", err)
	case <-ctx.Done():
		return nil
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("etcd did not become ready (is a quorum of --initial-cluster reachable?)")
	}
	fmt.Fprintf(out, "gazconsumer etcd: member %s serving clients on %s\n", cfg.Name, strings.Join(f.listenClient, ","))
	select {
	case <-ctx.Done():
		return nil
	case err = <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	}
}

func orDefault(v, fallback []string) []string {
	if len(v) == 0 {
		return fallback
	}
	return v
}
