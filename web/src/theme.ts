// Dark first; the choice is remembered in localStorage ("ep.theme"), the only thing stored there.
import { useCallback, useState } from "react";

export type Theme = "dark" | "light";
export const THEME_KEY = "ep.theme";

export function currentTheme(): Theme {
  return document.documentElement.getAttribute("data-theme") === "light" ? "light" : "dark";
}

export function applyTheme(theme: Theme): void {
  document.documentElement.setAttribute("data-theme", theme);
  try {
    localStorage.setItem(THEME_KEY, theme);
  } catch {
    // storage disabled: the choice lasts for this page only
  }
}

export function useTheme(): [Theme, () => void] {
  const [theme, setTheme] = useState<Theme>(currentTheme);
  const toggle = useCallback(() => {
    const next: Theme = currentTheme() === "dark" ? "light" : "dark";
    applyTheme(next);
    setTheme(next);
  }, []);
  return [theme, toggle];
}
