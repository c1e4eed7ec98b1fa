// Package web is Falcon's read-only dashboard, served by the API server at
// /ui/: the experiments (filtered, paged, their status live), one
// experiment (jobs, the history of its Status/Reason/Message, the tail of
// its logs, its artifacts with download links, its metrics as charts), the
// queues and capacity of each cluster, and a comparison of two to five
// experiments (compare.Specs and their metrics on one chart).
//
// It holds no data and no access rules of its own. Every page is read
// through the API server's gRPC services, over the connection the HTTP
// gateway uses, with the caller's credentials forwarded exactly as the
// gateway forwards them (the Cloudflare Access header or cookie, a bearer
// token; see apiserver's forwardHeader). So a page goes through the same
// interceptors as `falcon exp get`: authentication, the access rules, the
// user's registration; a user is shown nothing the API would refuse them,
// and an ID the API does not know is a 404 page.
//
// Pages are rendered on the server with html/template; charts are SVG
// drawn on the server (chart.go), so the browser needs no charting
// library. A little JavaScript (assets/ui.js) keeps statuses live through
// server-sent events: on an experiment's page it relays WatchExp (the
// same events as `falcon exp events -f`), and on the list it re-reads the
// experiments shown whenever the server's change feed names one of them,
// with a poll as the safety net for writes through another replica. The
// assets are embedded in the binary and nothing is fetched from elsewhere,
// which the Content-Security-Policy on every answer also enforces.
package web
