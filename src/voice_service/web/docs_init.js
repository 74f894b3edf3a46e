// Starts Swagger UI on /api/v1/docs (a file, not inline script: see docs.py) with the
// document the top bar's link names (?api=openai: the OpenAI-compatible API's).
"use strict";

// Swagger UI plays an audio answer from the request's URL, which a browser would GET
// (405, and without the key): play the bytes it received instead, as a blob: URL.
const blobUrls = new WeakMap();

function blobUrl(blob) {
  if (!blobUrls.has(blob)) {
    blobUrls.set(blob, URL.createObjectURL(blob));
  }
  return blobUrls.get(blob);
}

function AudioFromItsBytes() {
  return {
    wrapComponents: {
      responseBody: (Original, system) => (props) => {
        const audio = /^audio\//i.test(props.contentType || "") && props.content instanceof Blob;
        const url = audio ? blobUrl(props.content) : props.url;
        return system.React.createElement(Original, { ...props, url });
      },
    },
  };
}

window.addEventListener("load", () => {
  const documents = Array.from(document.querySelectorAll("a[data-openapi-url]"));
  const wanted = new URLSearchParams(window.location.search).get("api");
  const shown = documents.find((link) => link.dataset.api === wanted) || documents[0];
  shown.setAttribute("aria-current", "page");
  window.ui = SwaggerUIBundle({
    url: shown.dataset.openapiUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    plugins: [AudioFromItsBytes],
    // Offline: no badge fetched from the public validator.
    validatorUrl: null,
  });
});
