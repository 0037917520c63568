"""Loading user scripts and tracing them through dynamo and AOT autograd (the only torch-private layer)."""
