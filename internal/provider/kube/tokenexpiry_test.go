package kube_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientauthenticationv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/provider/kube"
	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
	"github.com/falconhq/falcon/internal/testenv/syncbuf"
)

// Token timing. The apiserver's webhook refuses a token tokenLifetime after
// it was issued. A token's expiry, when the plugin announces it, is
// tokenAnnounced after issue, truncated to the second by the ExecCredential's
// RFC 3339 timestamp: client-go replaces a token at least a second before the
// server would refuse it, as oauth2 token sources do, to absorb request
// latency. The relay cuts every connection each cutEvery, which outlasts an
// announced token, so every re-established watch needs a new one.
//
// kube-apiserver caches a successful token authentication for 10s, on top of
// the webhook's own cache (--authentication-token-webhook-cache-ttl, made
// short here) and with no flag to change it. An expired token is therefore
// still accepted until 10s after its last successful review, and a client
// that never replaces its token meets a 401 10-12s after it started using it.
const (
	tokenLifetime   = 3 * time.Second
	tokenAnnounced  = 2 * time.Second
	cutEvery        = 2 * time.Second
	webhookCacheTTL = time.Second
)

// envMintURL, when set, makes this test binary (TestMain) act as the
// exec credential plugin, fetching a token from this URL.
const envMintURL = "FALCON_TEST_TOKEN_MINT_URL"

// TestTokenExpiry proves that Falcon keeps watching and driving an edge
// cluster whose credentials really expire on the server. The apiserver
// authenticates bearer tokens with a TokenReview webhook served by the test,
// which refuses a token tokenLifetime after issuing it; the kubeconfig's user
// is an exec plugin (this test binary) that asks the same server for a new
// token. Between client and apiserver a TCP relay severs every connection
// each cutEvery, as a load balancer draining does, so the informers must
// re-establish their watches again and again, each time with a token the
// server still accepts. (kube-apiserver's --min-request-timeout cannot end
// the watches instead: it only bounds watches that ask for no timeout, and
// client-go's reflectors always ask for 5-10 minutes.)
//
// client-go learns that a token expired in one of two ways, and both are
// exercised:
//  1. The first token's ExecCredential carries no expiry, as with many
//     plugins: client-go uses it until the apiserver answers 401, then runs
//     the plugin again. The informers' watch is refused and they must
//     re-list with the new token.
//  2. Every later token announces its expiry: client-go replaces it before
//     the server refuses it, and none of them is ever refused.
//
// A Job dispatched at the start runs throughout. After many expiries the
// cuts stop and the test waits until every token has expired, so the open
// watches have outlived theirs; then the Job is stopped, and Observe, which
// trusts the informer's cache whenever that holds the Job, reports it gone
// only once a watch delivered the deletion. A second Job dispatched then must
// be seen running to completion. Finally the first token, tried directly, is
// refused: expiry is the apiserver's doing.
func TestTokenExpiry(t *testing.T) {
	begin := time.Now()
	issuer := &tokenIssuer{lifetime: tokenLifetime, tokens: map[string]*issuedToken{}}
	srv := httptest.NewServer(issuer)
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	webhook := filepath.Join(dir, "token-webhook.kubeconfig")
	writeKubeconfig(t, webhook, &clientcmdapi.Cluster{Server: srv.URL + "/authenticate"}, &clientcmdapi.AuthInfo{})
	c := kubeenv.Start(t, kubeenv.WithExtraArgs("kube-apiserver",
		"--authentication-token-webhook-config-file="+webhook,
		"--authentication-token-webhook-version=v1",
		"--authentication-token-webhook-cache-ttl="+webhookCacheTTL.String(),
	))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	const ns = "falcon-jobs"
	if _, err := c.AddNodes(ctx, 1, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}

	relay := startRelay(t, c.Host())
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, kubeconfig,
		&clientcmdapi.Cluster{Server: relay.url(), CertificateAuthorityData: c.RESTConfig().CAData},
		&clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
			APIVersion:      clientauthenticationv1.SchemeGroupVersion.String(),
			Command:         exe,
			Args:            []string{"-test.run=^$"}, // TestMain answers before any test would run
			Env:             []clientcmdapi.ExecEnvVar{{Name: envMintURL, Value: srv.URL + "/mint"}},
			InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}})

	var logs syncbuf.Buffer
	b := kube.New(kube.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	t.Cleanup(b.Close)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("backend log:\n%s", logs.String())
		}
	})
	cluster := &falconv1.Cluster{Id: "cl-rotating", Name: "rotating", Kubeconfig: kubeconfig, KubeContext: "edge", Namespace: ns}

	waitPhase := func(j *falconv1.Job, want resourcemanager.Phase) {
		t.Helper()
		deadline := time.Now().Add(45 * time.Second)
		for {
			obs, err := b.Observe(ctx, cluster, j)
			if err == nil && obs.Phase == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s never %s: last %s %q, err %v; tokens: %s", j.GetId(), want, obs.Phase, obs.Message, err, issuer.stats())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	eventually := func(what string, ok func(tokenStats) bool) {
		t.Helper()
		deadline := time.Now().Add(45 * time.Second)
		for !ok(issuer.stats()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: never happened; tokens: %s", what, issuer.stats())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	long := cpuJob("job-long", map[string]string{"FALCON_TEST_RUN_FOREVER": "true"})
	if err := b.Dispatch(ctx, cluster, long); err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	issuer.announce(tokenAnnounced) // from the second token on
	waitPhase(long, resourcemanager.PhaseRunning)
	stopCuts := relay.cutEvery(cutEvery)
	t.Cleanup(stopCuts)
	eventually("the apiserver refuses the first token and a token issued after that is accepted", func(s tokenStats) bool {
		return s.recovered
	})
	t.Logf("after %s, the first token was refused and replaced: %s", time.Since(begin).Round(100*time.Millisecond), issuer.stats())
	eventually("5 tokens with an announced expiry are accepted", func(s tokenStats) bool { return s.announcedAccepted >= 5 })
	waitPhase(long, resourcemanager.PhaseRunning)

	// Calls, and watches delivering what they cause. The cuts stop, since a
	// cut call is not what this test is about, and once every token minted
	// so far has expired, the watches now open are older than their token:
	// the calls need a new one, and what they cause must still arrive.
	stopCuts()
	time.Sleep(time.Until(issuer.lastExpiry()))
	quiet := time.Now()
	if err := b.Stop(ctx, cluster, long); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	waitPhase(long, resourcemanager.PhaseUnknown)
	short := cpuJob("job-short", map[string]string{"FALCON_TEST_DURATION": "1s"})
	if err := b.Dispatch(ctx, cluster, short); err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	waitPhase(short, resourcemanager.PhaseSucceeded)
	if err := b.Stop(ctx, cluster, short); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !issuer.acceptedIssuedAfter(quiet) {
		t.Errorf("the calls after every token expired used no new token")
	}
	end := issuer.stats()
	t.Logf("done after %s: %d connection cuts, %d connections; %s",
		time.Since(begin).Round(100*time.Millisecond), relay.cuts(), relay.accepted(), end)

	if end.announcedRefused > 0 {
		t.Errorf("%d tokens were refused although client-go had been told when they expire", end.announcedRefused)
	}
	if end.unknown > 0 {
		t.Errorf("the apiserver asked about %d tokens the issuer never minted", end.unknown)
	}

	// Expiry is the apiserver's doing: the first token, long expired, is
	// refused to any client, while one just minted is accepted.
	direct := func(token string) error {
		rc := c.RESTConfig()
		rc.BearerToken = token
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err
	}
	if err := direct(issuer.first()); !apierrors.IsUnauthorized(err) {
		t.Errorf("the first token, issued %s ago: got %v, want 401 Unauthorized", time.Since(issuer.firstIssued()).Round(time.Second), err)
	}
	if err := direct(issuer.mint().Status.Token); err != nil {
		t.Errorf("a token just minted: %v", err)
	}
}

// TestMain turns this test binary into TestTokenExpiry's exec credential
// plugin when client-go runs it with envMintURL set: it prints the
// ExecCredential the test's issuer mints, and runs no test.
func TestMain(m *testing.M) {
	if url := os.Getenv(envMintURL); url != "" {
		credentialPlugin(url)
	}
	os.Exit(m.Run())
}

func credentialPlugin(url string) {
	resp, err := http.Get(url)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", url, resp.Status)
	}
	if err == nil {
		_, err = io.Copy(os.Stdout, resp.Body)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// cpuJob is a one-pod CPU job whose pod kwok runs as envs say (see kubeenv).
func cpuJob(id string, envs map[string]string) *falconv1.Job {
	return &falconv1.Job{Id: id, ExpId: "exp-rotating", Role: "main", TaskSpec: &falconv1.TaskSpec{
		Command: "python train.py", Image: "python:3.12", Replica: 1, DeviceType: "cpu", Envs: envs,
	}}
}

// writeKubeconfig writes a kubeconfig with one cluster, user and context,
// all named edge.
func writeKubeconfig(t *testing.T, path string, cluster *clientcmdapi.Cluster, user *clientcmdapi.AuthInfo) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["edge"] = cluster
	cfg.AuthInfos["edge"] = user
	cfg.Contexts["edge"] = &clientcmdapi.Context{Cluster: "edge", AuthInfo: "edge"}
	cfg.CurrentContext = "edge"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

// tokenIssuer plays an identity provider: GET /mint issues a token as an
// ExecCredential, and POST /authenticate is the apiserver's TokenReview
// webhook, authenticating a token as a member of system:masters until it
// expires. It remembers every review.
type tokenIssuer struct {
	lifetime time.Duration

	mu        sync.Mutex
	announced time.Duration // 0: ExecCredentials carry no expiry
	tokens    map[string]*issuedToken
	order     []*issuedToken
	// firstRefusal is when the webhook first refused a token.
	firstRefusal time.Time
	unknown      int // reviews of tokens never minted
}

type issuedToken struct {
	value             string
	issued, expires   time.Time
	announced         bool
	accepted, refused int // reviews
}

func (s *tokenIssuer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var out any
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/mint":
		out = s.mint()
	case r.Method == http.MethodPost && r.URL.Path == "/authenticate":
		var review authenticationv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		review.Status = s.review(review.Spec.Token)
		if review.Status.Authenticated {
			review.Status.Audiences = review.Spec.Audiences
		}
		out = review
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// announce makes the ExecCredentials of tokens minted from now on say they
// expire d after issue.
func (s *tokenIssuer) announce(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.announced = d
}

func (s *tokenIssuer) mint() *clientauthenticationv1.ExecCredential {
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	now := time.Now()
	tok := &issuedToken{value: hex.EncodeToString(raw), issued: now, expires: now.Add(s.lifetime)}
	cred := &clientauthenticationv1.ExecCredential{
		TypeMeta: metav1.TypeMeta{APIVersion: clientauthenticationv1.SchemeGroupVersion.String(), Kind: "ExecCredential"},
		Status:   &clientauthenticationv1.ExecCredentialStatus{Token: tok.value},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.announced > 0 {
		tok.announced = true
		cred.Status.ExpirationTimestamp = &metav1.Time{Time: now.Add(s.announced)}
	}
	s.tokens[tok.value] = tok
	s.order = append(s.order, tok)
	return cred
}

func (s *tokenIssuer) review(token string) authenticationv1.TokenReviewStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, ok := s.tokens[token]
	switch {
	case !ok:
		s.unknown++
		return authenticationv1.TokenReviewStatus{Error: "unknown token"}
	case time.Now().After(tok.expires):
		tok.refused++
		if s.firstRefusal.IsZero() {
			s.firstRefusal = time.Now()
		}
		return authenticationv1.TokenReviewStatus{Error: "token expired"}
	}
	tok.accepted++
	return authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
		Username: "falcon-edge", UID: "falcon-edge", Groups: []string{"system:masters"},
	}}
}

// first returns the first token minted.
func (s *tokenIssuer) first() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order[0].value
}

func (s *tokenIssuer) firstIssued() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order[0].issued
}

// lastExpiry is when the last token minted so far expires.
func (s *tokenIssuer) lastExpiry() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order[len(s.order)-1].expires
}

// acceptedIssuedAfter reports whether a token issued after t was accepted.
func (s *tokenIssuer) acceptedIssuedAfter(t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tok := range s.order {
		if tok.issued.After(t) && tok.accepted > 0 {
			return true
		}
	}
	return false
}

// tokenStats counts tokens by what the apiserver made of them.
type tokenStats struct {
	minted            int
	accepted, refused int // tokens accepted at least once; refused at least once
	announcedAccepted int // of those accepted, tokens minted with an announced expiry
	announcedRefused  int
	// recovered: a token minted after the first refusal was accepted.
	recovered bool
	unknown   int
}

func (s tokenStats) String() string {
	return fmt.Sprintf("%d minted, %d accepted (%d with announced expiry), %d refused (%d with announced expiry)",
		s.minted, s.accepted, s.announcedAccepted, s.refused, s.announcedRefused)
}

func (s *tokenIssuer) stats() tokenStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := tokenStats{minted: len(s.order), unknown: s.unknown}
	for _, tok := range s.order {
		if tok.accepted > 0 {
			st.accepted++
			if tok.announced {
				st.announcedAccepted++
			}
			if !s.firstRefusal.IsZero() && tok.issued.After(s.firstRefusal) {
				st.recovered = true
			}
		}
		if tok.refused > 0 {
			st.refused++
			if tok.announced {
				st.announcedRefused++
			}
		}
	}
	return st
}

// relay forwards TCP connections to the apiserver and can sever all of them
// at once, as a load balancer in front of a control plane does when it
// drains: every watch then ends and must be re-established.
type relay struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	ncuts     int
	naccepted int
}

// startRelay relays to host (https://127.0.0.1:port) until the test ends.
func startRelay(t *testing.T, host string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, target: strings.TrimPrefix(host, "https://"), conns: map[net.Conn]struct{}{}}
	go r.serve()
	t.Cleanup(func() {
		ln.Close()
		r.cut()
	})
	return r
}

// url is the relay's address for a kubeconfig; the apiserver's serving
// certificate is valid for 127.0.0.1.
func (r *relay) url() string { return "https://" + r.ln.Addr().String() }

func (r *relay) serve() {
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", r.target)
		if err != nil {
			in.Close()
			continue
		}
		r.mu.Lock()
		r.conns[in], r.conns[out] = struct{}{}, struct{}{}
		r.naccepted++
		r.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
			r.mu.Lock()
			delete(r.conns, dst)
			delete(r.conns, src)
			r.mu.Unlock()
		}
		go pipe(in, out)
		go pipe(out, in)
	}
}

// cut closes every relayed connection.
func (r *relay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.conns {
		c.Close()
		delete(r.conns, c)
	}
	r.ncuts++
}

func (r *relay) cuts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ncuts
}

// accepted is how many connections clients opened.
func (r *relay) accepted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.naccepted
}

// cutEvery cuts every connection each d until the returned func is called.
func (r *relay) cutEvery(d time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				r.cut()
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() { close(done); wg.Wait() })
	}
}
