module github.com/tollgate-dev/tollgate

go 1.26.8

require github.com/google/jsonschema-go v0.4.3
