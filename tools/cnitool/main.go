// cnitool: the project's test runtime over the real libcni (containernetworking/cni, built from Debian's
// golang-github-appc-cni-dev by scripts/build-cnitool.sh). Every decision a runtime makes — config version,
// injected keys, prevResult, the result cache, GC's DELs of stale cached attachments, STATUS — is libcni's own;
// this file only turns flags into libcni calls and prints what comes back.
//
//	cnitool [flags] add|check|del|gc|status|version|cached
//
// Output: add prints the result (in the list's version) on stdout; version prints the plugin's version info;
// cached prints libcni's cached attachments; the other verbs print nothing on success. A failure prints one
// JSON object on stdout, {"code", "msg", "details", "error"[, "errors"]}: code/msg/details of the first CNI
// error object in the chain (a plugin's, or libcni's own), error = libcni's full message; exit status 1.
// Usage errors: a message on stderr, exit status 2.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

const (
	exitFailed = 1
	exitUsage  = 2
)

// validFlag tells "-valid not given" (GC with no list: the keys are absent) from "-valid '[]'" (an empty list).
type validFlag struct {
	set  bool
	list []types.GCAttachment
}

func (v *validFlag) String() string { return "" }
func (v *validFlag) Set(s string) error {
	v.set = true
	v.list = []types.GCAttachment{}
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return json.Unmarshal([]byte(s), &v.list)
}

type options struct {
	conflist, name, cniPath, cacheDir, trace          string
	netns, containerID, ifname, args, capArgs, plugin string
	valid                                             validFlag
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(argv []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("cnitool", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.conflist, "conflist", "", "a .conflist/.conf/.json file, or a directory searched like libcni's LoadConfList (needs -name)")
	fs.StringVar(&o.name, "name", "", "network name, when -conflist is a directory")
	fs.StringVar(&o.cniPath, "cni-path", os.Getenv("CNI_PATH"), "plugin directories, colon-separated (CNI_PATH)")
	fs.StringVar(&o.cacheDir, "cache-dir", "", "libcni's cache directory (results/ below it); default libcni's /var/lib/cni")
	fs.StringVar(&o.netns, "netns", "", "CNI_NETNS")
	fs.StringVar(&o.containerID, "container-id", "", "CNI_CONTAINERID")
	fs.StringVar(&o.ifname, "ifname", "eth0", "CNI_IFNAME")
	fs.StringVar(&o.args, "args", "", "CNI_ARGS, K=V;K2=V2")
	fs.StringVar(&o.capArgs, "cap-args", "", "capability arguments, a JSON object (RuntimeConf.CapabilityArgs)")
	fs.Var(&o.valid, "valid", `gc: the valid attachments, a JSON array of {"containerID","ifname"}; absent = no list at all`)
	fs.StringVar(&o.plugin, "plugin", "", "version: the plugin type to ask")
	fs.StringVar(&o.trace, "trace", "", "append one JSON line per plugin execution to this file")
	if err := fs.Parse(argv); err != nil {
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: cnitool [flags] add|check|del|gc|status|version|cached")
		return exitUsage
	}
	verb := fs.Arg(0)

	rt, err := runtimeConf(&o)
	if err != nil {
		fmt.Fprintln(stderr, "cnitool:", err)
		return exitUsage
	}
	var tr *tracer
	var exec invoke.Exec
	if o.trace != "" {
		tr = &tracer{file: o.trace}
		exec = tr
	}
	cni := libcni.NewCNIConfigWithCacheDir(filepath.SplitList(o.cniPath), o.cacheDir, exec)
	ctx := context.Background()

	switch verb {
	case "version":
		if o.plugin == "" {
			fmt.Fprintln(stderr, "cnitool: version needs -plugin")
			return exitUsage
		}
		info, err := cni.GetVersionInfo(ctx, o.plugin)
		if err != nil {
			return fail(stdout, err)
		}
		if err := info.Encode(stdout); err != nil {
			return fail(stdout, err)
		}
		return 0
	case "cached":
		atts, err := cni.GetCachedAttachments(o.containerID)
		if err != nil {
			return fail(stdout, err)
		}
		return printJSON(stdout, atts)
	case "add", "check", "del", "gc", "status":
	default:
		fmt.Fprintf(stderr, "cnitool: unknown verb %q\n", verb)
		return exitUsage
	}

	list, err := loadList(o.conflist, o.name)
	if err != nil {
		return fail(stdout, err)
	}
	switch verb {
	case "add":
		result, err := cni.AddNetworkList(ctx, list, rt)
		if err != nil {
			return fail(stdout, err)
		}
		if err := result.PrintTo(stdout); err != nil {
			return fail(stdout, err)
		}
	case "check":
		err = cni.CheckNetworkList(ctx, list, rt)
	case "del":
		err = cni.DelNetworkList(ctx, list, rt)
	case "gc":
		var args *libcni.GCArgs
		if o.valid.set {
			args = &libcni.GCArgs{ValidAttachments: o.valid.list}
		}
		err = cni.GCNetworkList(ctx, list, args)
	case "status":
		err = cni.GetStatusNetworkList(ctx, list)
	}
	if err != nil {
		return fail(stdout, err)
	}
	return 0
}

func runtimeConf(o *options) (*libcni.RuntimeConf, error) {
	rt := &libcni.RuntimeConf{ContainerID: o.containerID, NetNS: o.netns, IfName: o.ifname}
	if o.args != "" {
		for _, pair := range strings.Split(o.args, ";") {
			kv := strings.SplitN(pair, "=", 2)
			if len(kv) != 2 || kv[0] == "" {
				return nil, fmt.Errorf("invalid -args pair %q: want K=V", pair)
			}
			rt.Args = append(rt.Args, [2]string{kv[0], kv[1]})
		}
	}
	if o.capArgs != "" {
		if err := json.Unmarshal([]byte(o.capArgs), &rt.CapabilityArgs); err != nil {
			return nil, fmt.Errorf("invalid -cap-args: %w", err)
		}
	}
	return rt, nil
}

// loadList reads a conflist file (a single-plugin .conf/.json is up-converted, as libcni does), or finds the
// list named `name` in a directory with libcni's LoadConfList.
func loadList(path, name string) (*libcni.NetworkConfigList, error) {
	if path == "" {
		return nil, errors.New("no -conflist given")
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		if name == "" {
			return nil, errors.New("-conflist is a directory: -name is required")
		}
		return libcni.LoadConfList(path, name)
	}
	if filepath.Ext(path) == ".conflist" {
		return libcni.ConfListFromFile(path)
	}
	single, err := libcni.ConfFromFile(path)
	if err != nil {
		return nil, err
	}
	return libcni.ConfListFromConf(single)
}

type failure struct {
	Code    uint     `json:"code"`
	Msg     string   `json:"msg"`
	Details string   `json:"details,omitempty"`
	Error   string   `json:"error"`
	Errors  []string `json:"errors,omitempty"`
}

// fail prints the error: the first CNI error object in its chain (errors.Join included) gives code/msg/details;
// an error without one (a missing plugin, a bad config file) has code 0 and its message as msg.
func fail(stdout io.Writer, err error) int {
	f := failure{Msg: err.Error(), Error: err.Error()}
	var cniErr *types.Error
	if errors.As(err, &cniErr) {
		f.Code, f.Msg, f.Details = cniErr.Code, cniErr.Msg, cniErr.Details
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			f.Errors = append(f.Errors, e.Error())
		}
	}
	printJSON(stdout, f)
	return exitFailed
}

func printJSON(w io.Writer, v interface{}) int {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cnitool:", err)
		return exitFailed
	}
	_, _ = w.Write(append(b, '\n'))
	return 0
}

// tracer is libcni's own plugin executor (invoke.RawExec) with a record of each execution appended to a file:
// what libcni chose to send (environment, stdin) and what came back. It decides nothing.
type tracer struct {
	file string
	mu   sync.Mutex
}

type traceLine struct {
	Plugin string            `json:"plugin"`
	Path   string            `json:"pluginPath"`
	Env    map[string]string `json:"env"`
	Stdin  json.RawMessage   `json:"stdin"`
	Stdout string            `json:"stdout"`
	Stderr string            `json:"stderr"`
	Error  string            `json:"error,omitempty"`
}

func (t *tracer) ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error) {
	var stderr bytes.Buffer
	out, err := (&invoke.RawExec{Stderr: &stderr}).ExecPlugin(ctx, pluginPath, stdinData, environ)
	line := traceLine{Plugin: filepath.Base(pluginPath), Path: pluginPath, Env: map[string]string{}, Stdout: string(out), Stderr: stderr.String()}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "CNI_") {
			line.Env[k] = v
		}
	}
	if json.Valid(stdinData) {
		line.Stdin = stdinData
	} else {
		line.Stdin, _ = json.Marshal(string(stdinData))
	}
	if err != nil {
		line.Error = err.Error()
		if e, ok := err.(*types.Error); ok {
			b, _ := json.Marshal(e)
			line.Stdout = string(b)
		}
	}
	t.append(line)
	_, _ = stderr.WriteTo(os.Stderr)
	return out, err
}

func (t *tracer) append(line traceLine) {
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f, err := os.OpenFile(t.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cnitool: trace:", err)
		return
	}
	defer f.Close()
	_, _ = f.Write(append(b, '\n'))
}

func (t *tracer) FindInPath(plugin string, paths []string) (string, error) {
	return invoke.FindInPath(plugin, paths)
}

func (t *tracer) Decode(jsonBytes []byte) (version.PluginInfo, error) {
	return (&version.PluginDecoder{}).Decode(jsonBytes)
}
