package v1alpha1

// ReasonUnknownTestParam (TriggerHandled=False and a Warning event): a
// trigger set a variable the suite does not list in tests[].params.
const ReasonUnknownTestParam = "UnknownTestParam"

// RoleTestCache labels a suite's test cache claim (tests[].cache).
const RoleTestCache = "test-cache"
