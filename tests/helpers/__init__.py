"""What tests share: servers, tenants, clips and request helpers. Test modules import from
here, never from one another or from a conftest."""
