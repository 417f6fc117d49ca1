package testdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
)

// DockerImage is the image Get runs when it falls back to Docker.
const DockerImage = "mysql:8.4"

// dockerMaxWait bounds the image pull and the server's first start.
const dockerMaxWait = 5 * time.Minute

// startDocker runs DockerImage with its port 3306 published on 127.0.0.1
// only, when a Docker engine answers, waits until it accepts connections,
// and returns it with a function that removes the container.
func startDocker() (*Server, func() error, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), ProbeTimeout)
	err = pool.Client.PingWithContext(ctx)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("no engine: %w", err)
	}
	res, err := pool.RunWithOptions(&dockertest.RunOptions{
		Repository: "mysql",
		Tag:        "8.4",
		Env:        []string{"MYSQL_ALLOW_EMPTY_PASSWORD=yes", "MYSQL_DATABASE=test", "MYSQL_ROOT_HOST=%"},
		PortBindings: map[dc.Port][]dc.PortBinding{
			"3306/tcp": {{HostIP: "127.0.0.1", HostPort: ""}},
		},
	}, func(hc *dc.HostConfig) {
		hc.PublishAllPorts = false
		hc.AutoRemove = true
		hc.RestartPolicy = dc.RestartPolicy{Name: "no"}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("run %s: %w", DockerImage, err)
	}
	purge := func() error { return pool.Purge(res) }

	dsn := "root@tcp(" + res.GetHostPort("3306/tcp") + ")/test"
	pool.MaxWait = dockerMaxWait
	var id identity
	if err := pool.Retry(func() (err error) {
		id, err = probe(dsn, ProbeTimeout)
		return err
	}); err != nil {
		return nil, nil, errors.Join(fmt.Errorf("%s never answered at %s: %w", DockerImage, dsn, err), purge())
	}
	return describe(&Server{DSN: dsn}, id, "from docker "+DockerImage+" container"), purge, nil
}
