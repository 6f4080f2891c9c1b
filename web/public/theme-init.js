// Runs before the first paint so a light-theme user never sees a dark flash.
// localStorage holds only the theme; never a credential.
try {
  const t = localStorage.getItem("ep.theme");
  if (t === "light" || t === "dark") document.documentElement.setAttribute("data-theme", t);
} catch {
  // storage disabled: stay dark
}
