#!/usr/bin/env bash
# Regenerates the committed protobuf, gRPC, gateway and OpenAPI code from
# api/falcon/v1/falcon.proto, and the protobuf code of the XProf profile
# format from api/xplane/v1/xplane.proto. Plugin versions are pinned by go.mod's
# tool block, so everyone produces byte-identical output.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v protoc >/dev/null; then
  echo "protoc not found: install it (Debian: apt-get install -y protobuf-compiler)" >&2
  exit 1
fi

bin="$(mktemp -d)"
trap 'rm -rf "$bin"' EXIT
for t in protoc-gen-go protoc-gen-go-grpc protoc-gen-grpc-gateway protoc-gen-openapiv2; do
  go build -o "$bin/$t" "$(go list -f '{{.ImportPath}}' tool | grep "/$t\$")"
done

dir=api/falcon/v1
PATH="$bin:$PATH" protoc -I "$dir" -I /usr/include \
  --go_out=paths=source_relative:"$dir" \
  --go-grpc_out=paths=source_relative:"$dir" \
  --grpc-gateway_out=paths=source_relative,grpc_api_configuration="$dir/gateway.yaml",generate_unbound_methods=false:"$dir" \
  --openapiv2_out="$dir" \
  --openapiv2_opt=grpc_api_configuration="$dir/gateway.yaml",generate_unbound_methods=false,json_names_for_fields=false,allow_merge=true,merge_file_name=falcon \
  "$dir/falcon.proto"

# XProf's profile format, as Falcon reads it (messages only: no service).
dir=api/xplane/v1
PATH="$bin:$PATH" protoc -I "$dir" --go_out=paths=source_relative:"$dir" "$dir/xplane.proto"
