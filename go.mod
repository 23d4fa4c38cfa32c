module relay

go 1.26.8

require (
	github.com/cespare/xxhash/v2 v2.3.0
	go.yaml.in/yaml/v3 v3.0.6
	gopkg.in/natefinch/lumberjack.v2 v2.2.1
)
