package falconv1

import _ "embed"

// OpenAPI is the OpenAPI (Swagger 2.0) document of the public HTTP gateway,
// generated from falcon.proto and gateway.yaml.
//
//go:embed falcon.swagger.json
var OpenAPI []byte
