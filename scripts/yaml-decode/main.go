// Command yaml-decode reads a stream of YAML (or JSON) documents on stdin and prints each one as the
// JSON a Kubernetes client sends for it, one per line: split by apimachinery's YAMLReader and
// converted by sigs.k8s.io/yaml, the reader kubectl, Helm and client-go use. Empty documents are
// skipped. The tests compare its output with what the project meant to write.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func main() {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(os.Stdin))
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for {
		document, err := reader.Read()
		if err == io.EOF {
			return
		}
		if err != nil {
			fail(out, err)
		}
		converted, err := yaml.YAMLToJSON(document)
		if err != nil {
			fail(out, err)
		}
		if string(converted) == "null" {
			continue
		}
		out.Write(converted)
		out.WriteString("\n")
	}
}

func fail(out *bufio.Writer, err error) {
	out.Flush()
	fmt.Fprintln(os.Stderr, "yaml-decode:", err)
	os.Exit(1)
}
