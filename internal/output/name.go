package output

import (
	"fmt"
	"io"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/falconhq/falcon/internal/errdefs"
)

// nameFields says, for the resources that are not known by their ID, which
// field other commands take instead: a cluster's name, a user's email.
var nameFields = map[protoreflect.FullName]string{
	"falcon.v1.Cluster": "name",
	"falcon.v1.User":    "email",
}

// Names are what -o name prints for msg: for a list (a message with
// repeated "items"), the name of each item; otherwise the name of msg, or
// of the experiment it carries (an abort's answer). A resource's name is
// what other commands take to find it: its ID, or the field nameFields
// gives. A message that names nothing is bad input against -o.
func Names(msg proto.Message) ([]string, error) {
	m := msg.ProtoReflect()
	if fd := m.Descriptor().Fields().ByName("items"); fd != nil && fd.IsList() && fd.Message() != nil {
		list := m.Get(fd).List()
		out := make([]string, 0, list.Len())
		for i := range list.Len() {
			if n := nameOf(list.Get(i).Message()); n != "" {
				out = append(out, n)
			}
		}
		return out, nil
	}
	if s, ok := msg.(*structpb.Struct); ok {
		return structNames(s)
	}
	if n := nameOf(m); n != "" {
		return []string{n}, nil
	}
	return nil, NoNames()
}

// NoNames is the error of -o name for output that names no resource.
func NoNames() error {
	return errdefs.Invalid("--output", "name: this command's output names no experiment, job, cluster or other resource; use -o json (with --jq to pick fields) instead")
}

func nameOf(m protoreflect.Message) string {
	fields := m.Descriptor().Fields()
	key := "id"
	if k, ok := nameFields[m.Descriptor().FullName()]; ok {
		key = k
	}
	for _, k := range []string{key, "id"} {
		if fd := fields.ByName(protoreflect.Name(k)); fd != nil && fd.Kind() == protoreflect.StringKind && !fd.IsList() {
			if v := m.Get(fd).String(); v != "" {
				return v
			}
		}
	}
	if fd := fields.ByName("experiment"); fd != nil && fd.Message() != nil && m.Has(fd) {
		return nameOf(m.Get(fd).Message())
	}
	return ""
}

// structNames reads a result the CLI computed (output.Struct): its "items"
// or its own "id" or "name".
func structNames(s *structpb.Struct) ([]string, error) {
	pick := func(st *structpb.Struct) string {
		for _, k := range []string{"id", "name"} {
			if v := st.GetFields()[k].GetStringValue(); v != "" {
				return v
			}
		}
		return ""
	}
	if items := s.GetFields()["items"].GetListValue(); items != nil {
		var out []string
		for _, it := range items.GetValues() {
			if n := pick(it.GetStructValue()); n != "" {
				out = append(out, n)
			}
		}
		return out, nil
	}
	if n := pick(s); n != "" {
		return []string{n}, nil
	}
	return nil, NoNames()
}

// WriteNames prints msg's Names, one per line.
func WriteNames(w io.Writer, msg proto.Message) error {
	names, err := Names(msg)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return nil
	}
	_, err = fmt.Fprintln(w, strings.Join(names, "\n"))
	return err
}
