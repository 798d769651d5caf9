pytest_plugins = ["tests.plugins.postgres"]
