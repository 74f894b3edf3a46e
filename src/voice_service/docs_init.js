// Starts Swagger UI on /api/v1/docs (a file, not inline script: see docs.py).
"use strict";
window.addEventListener("load", () => {
  const root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    // Offline: no badge fetched from the public validator.
    validatorUrl: null,
  });
});
