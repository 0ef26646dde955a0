import { createContext, useContext } from "react";
import type { Me } from "../api";

export const MeContext = createContext<Me | null>(null);

/** The signed-in user (App loads it before rendering any page). */
export function useMe(): Me {
  const me = useContext(MeContext);
  if (me === null) throw new Error("useMe() outside of the signed-in app");
  return me;
}
