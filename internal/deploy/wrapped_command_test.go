package deploy

// commandCase is a container as written (YAML) and the command it should
// run once its image is wrapped.
type commandCase struct {
	name      string
	container string
	want      []any
}

// wrappedCommandCases are the ways a container can name what it runs, for
// an image whose entrypoint is /server and cmd --port=8080, with the
// command wrap (delve's or the supervisor's command line for a program and
// its arguments) should give each: debugging and live update follow the
// same rules, so they are written once.
func wrappedCommandCases(wrap func(program string, args ...any) []any) []commandCase {
	return []commandCase{
		{"image entrypoint and cmd", `{name: c, image: api:dev}`, wrap("/server", "--port=8080")},
		{"args replace the image's cmd", `{name: c, image: api, args: [-v, "2"]}`, wrap("/server", "-v", "2")},
		{"a command drops the image's cmd", `{name: c, image: api, command: [/bin/other, -x]}`, wrap("/bin/other", "-x")},
		{"command and args", `{name: c, image: api, command: [/bin/other], args: [run]}`, wrap("/bin/other", "run")},
	}
}
