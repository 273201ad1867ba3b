pytest_plugins = ["sandbox.testing"]
