# CI's budget: .ci/run sources this. CI stops a run at 90 minutes, and on a
# slow machine with cold caches the whole of .ci/run does not fit in them
# (2026-11-29: the run went past 5400 s before its last step), so the steps
# beyond README's commands and make e2e-ci run only when what they cost cold
# still fits, and say so when they do not.
#
#   CI_START   the run's start (date +%s)
#   CI_BUDGET  seconds from CI_START that every step must end by

# timed CMD...: runs CMD and says how long it took.
timed() {
	local t=$SECONDS
	"$@"
	echo "ci: '$*' took $((SECONDS - t))s"
}

# ci_left: seconds left of the budget.
ci_left() { echo $((CI_START + CI_BUDGET - $(date +%s))); }

# ci_optional NEED CMD...: runs CMD (timed) when NEED seconds, what it has
# been measured to take cold, fit in what is left; else says it skipped it.
ci_optional() {
	local need=$1 left
	shift
	left=$(ci_left)
	if [ "$left" -lt "$need" ]; then
		echo "ci: skipped '$*': ${left}s left of the ${CI_BUDGET}s budget, and it takes about ${need}s cold (run it in a session)"
		return 0
	fi
	timed "$@"
}
