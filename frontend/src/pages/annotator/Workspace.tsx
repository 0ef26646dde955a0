import { useParams } from "react-router-dom";

/** The live workspace of one episode. */
export function Workspace() {
  const { episodeId } = useParams();
  return <h1>Episode {episodeId}</h1>;
}
