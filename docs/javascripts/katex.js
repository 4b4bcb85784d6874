/* Render the equations of the docs with the vendored KaTeX (docs/vendor/katex/): pymdownx.arithmatex
   (generic mode) writes each one as \( ... \) or \[ ... \] inside an element of class "arithmatex".
   Material's document$ fires on every page load, instant navigation included. throwOnError false:
   a formula KaTeX cannot parse shows as a .katex-error element (the docs tests look for none). */
document$.subscribe(() => {
  document.querySelectorAll(".arithmatex").forEach((element) => {
    renderMathInElement(element, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true },
      ],
      throwOnError: false,
    });
  });
});
