"""The web console (/ui/) and the API reference (/api/v2/docs): static pages and scripts in
`static/`, written for this project with no third-party code, that read only the public API."""
