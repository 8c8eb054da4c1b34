// Package registryauth is the token service of the chart's bundled
// registry (chart value registry.auth): the distribution registry's token
// authentication (https://distribution.github.io/distribution/spec/auth/token/)
// with the Kubernetes API server as the judge of who a caller is and what it
// may do.
//
// A client (the operator, a builder pod, the kubelet, `kubectl devloop
// push`) is sent here by the registry's Bearer challenge and presents a
// Kubernetes bearer token as the password of HTTP Basic (or of OAuth2's
// password grant, which containerd tries first). The service
//
//  1. authenticates it with a TokenReview for Audience ("devloop-registry")
//     only, so a token made with `kubectl create token SA
//     --audience=devloop-registry` works here and nowhere else, and an API
//     credential (a token of the API server's audience) is refused;
//  2. for every repository scope asked, takes the namespace from the
//     repository's first path component (`team-a/src` is team-a's) and asks
//     a SubjectAccessReview whether the caller may create pods in that
//     namespace. Whoever may create pods in a namespace can already run
//     code with its ServiceAccounts and read the registry credentials its
//     pods mount, so granting them its images adds no power; nobody else
//     gets anything: not another namespace's identities, not anonymous
//     callers;
//  3. signs a short-lived JWT listing only what was granted, which the
//     registry checks against the certificate in its rootcertbundle.
//
// Repositories with no namespace component (`busybox`) and the catalog are
// never granted: the bundled registry holds tenants' images only.
package registryauth
